"""The base of a knowledge file's entries (a model, a card, a link and their parts): frozen, no unknown key, no
infinity, and no true or false where a number goes."""
from __future__ import annotations

from types import UnionType
from typing import Annotated, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


def _numeric(annotation) -> bool:
    """Whether a field holds numbers (or a tuple or list of them), where pydantic would read YAML's true as 1."""
    if annotation in (int, float):
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _numeric(get_args(annotation)[0])
    if origin in (tuple, list, Union, UnionType):
        return any(_numeric(arg) for arg in get_args(annotation) if arg is not Ellipsis)
    return False


class Spec(BaseModel):
    """An entry of a knowledge file. allow_inf_nan=False: PositiveFloat takes .inf, which then divides into zeros
    and infinities inside the sizing."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_true_for_a_number(cls, value, info: ValidationInfo):
        # `memory_gb: true` was read as a 1 GB card, `layers: yes` as one layer: sized without a word
        if _numeric(cls.model_fields[info.field_name].annotation):
            items = value if isinstance(value, (list, tuple)) else (value,)
            if any(isinstance(item, bool) for item in items):
                raise ValueError("expected a number, not true or false")
        return value
