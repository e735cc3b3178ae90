"""The shapes of the service's JSON responses besides the decision itself (decide.Decision, compact.CompactDecision),
as pydantic models: the OpenAPI document declares them, so tool importers and schemathesis see real schemas.

The routes return their JSON directly (rows from the log are not re-validated on the way out: a row an older
version wrote must not become a 500); tests/test_openapi_fuzz.py checks that responses match these models.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..answer.model import Answer
from ..domain.vocabulary import Kind, Status

_FROZEN = ConfigDict(frozen=True)
SOURCE_DESCRIPTION = "Where the decision was asked for: http, mcp or cli."


class RuleEntry(BaseModel):
    """One rule of the rule set in service."""
    model_config = _FROZEN
    id: str = Field(description="The rule's id.")
    heuristics: list[str] = Field(description="Ids of the source document's heuristics it encodes.")
    description: str | None = Field(description="What the rule says, in words.")
    file: str = Field(description="Rule file it is written in.")
    line: int = Field(description="Line the rule starts on.")
    priority: int | float = Field(description="Its place in the order rules are tried (lower first).")


class RuleListing(BaseModel):
    """The rules in the order they are tried, and the digest of the rule set."""
    model_config = _FROZEN
    digest: str = Field(description="sha256 of the rule set in service (as in each answer's ruleset.digest).")
    rules: list[RuleEntry] = Field(description="The rules in the order they are tried.")


class DecisionSummary(BaseModel):
    """A logged decision as listed: its columns, not its stored answer."""
    model_config = _FROZEN
    decision_id: str = Field(description="The decision's id.")
    created_at: str = Field(description="When it was decided (ISO-8601, UTC).")
    session_id: str | None = Field(description="Conversation id given with it (null: none).")
    turn: int | None = Field(description="Turn of the conversation (null: none).")
    source: str = Field(description=SOURCE_DESCRIPTION)
    kind: Kind = Field(description="The kind recommended.")
    digest: str = Field(description="Digest of the rule set that decided.")
    status: Status | None = Field(description="final or provisional.")
    summary: str | None = Field(description="The recommendation's summary.")


class DecisionListing(BaseModel):
    """One page of logged decisions, newest first."""
    model_config = _FROZEN
    decisions: list[DecisionSummary] = Field(description="The decisions of this page, newest first.")
    next_cursor: str | None = Field(description="Give it as `cursor` for the next page; null on the last page.")


class LoggedDecision(BaseModel):
    """A logged decision in full: what was asked and the answer given (its questions and why-not are not stored:
    explain computes why-not again)."""
    model_config = _FROZEN
    decision_id: str = Field(description="The decision's id.")
    created_at: str = Field(description="When it was decided (ISO-8601, UTC).")
    session_id: str | None = Field(description="Conversation id given with it (null: none).")
    turn: int | None = Field(description="Turn of the conversation (null: none).")
    source: str = Field(description=SOURCE_DESCRIPTION)
    facts: dict = Field(description="The facts as given.")
    answer: Answer = Field(description="The answer given, as stored.")
    kind: Kind = Field(description="The kind recommended.")
    digest: str = Field(description="Digest of the rule set that decided.")
    engine: str = Field(description="Engine and version that decided.")


class ToolDefinition(BaseModel):
    """The facts schema as an LLM tool (function) definition."""
    model_config = _FROZEN
    name: str = Field(description="The tool's name.")
    description: str = Field(description="What the tool does, for the model.")
    parameters: dict = Field(description="JSON Schema of the facts, without $defs.")
