"""Replaying a logged decision: its stored facts answered again with the current rules, and what changed."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..answer.subject import checked_subject
from ..errors import KentinoError

# what of a recommendation a change of the rules can move
COMPARED = ("kind", "nodes", "gpus_per_node", "gpu", "precision", "replicas", "interconnect", "parallelism")


class FieldChange(BaseModel):
    """One field of the answer, before and after."""
    model_config = ConfigDict(frozen=True)
    old: object
    new: object


class RuleChange(BaseModel):
    """A rule that fired for only one of the two answers."""
    model_config = ConfigDict(frozen=True)
    rule: str
    old: bool
    new: bool
    change: str  # "no longer fires" or "now fires"


class Replay(BaseModel):
    """What re-evaluating a decision found: digest drift, and the changes of the answer (or why the stored
    facts no longer evaluate, in `error`)."""
    model_config = ConfigDict(frozen=True)
    decision_id: str | None
    old_digest: str | None
    new_digest: str
    digest_changed: bool
    unchanged: bool
    error: str | None = None
    changes: dict[str, FieldChange] = {}
    rules_changed: list[RuleChange] = []
    warnings_changed: list[str] = []
    new_answer: dict | None = None  # the new answer as JSON (None when it failed)

    def report(self) -> dict:
        """The replay as a JSON report (without the new answer; `error` only when there is one)."""
        return self.model_dump(mode="json", exclude={"new_answer"} | ({"error"} if self.error is None else set()))


def replay(expert, decision: dict) -> Replay:
    """Re-evaluate a stored decision's facts with the current rules; report what changed and digest drift.
    InputError naming the field when the stored decision is not the shape the log writes (another program
    may have written its row)."""
    decision = checked_subject(decision)
    old = decision.get("answer") or {}
    old_digest = decision.get("digest") or (old.get("ruleset") or {}).get("digest")
    drift = {"decision_id": decision.get("decision_id"), "old_digest": old_digest,
             "new_digest": expert.ruleset.digest, "digest_changed": old_digest != expert.ruleset.digest}
    try:
        answer = expert.recommend(decision.get("facts") or {})
    except KentinoError as exc:
        return Replay(**drift, unchanged=False, error=str(exc))
    new = answer.model_dump(mode="json")
    changes = _changes(old, new)
    old_rules = [step["rule"] for step in old.get("trace", [])]
    new_rules = [step["rule"] for step in new["trace"]]
    rules_changed = ([RuleChange(rule=r, old=True, new=False, change="no longer fires")
                      for r in old_rules if r not in new_rules]
                     + [RuleChange(rule=r, old=False, new=True, change="now fires")
                        for r in new_rules if r not in old_rules])
    old_warnings = {w["code"] for w in old.get("warnings", [])}
    warnings_changed = sorted(old_warnings ^ {w["code"] for w in new["warnings"]})
    return Replay(**drift, unchanged=not changes and not rules_changed and not warnings_changed, changes=changes,
                  rules_changed=rules_changed, warnings_changed=warnings_changed, new_answer=new)


def _changes(old: dict, new: dict) -> dict[str, FieldChange]:
    """The compared fields of the recommendation, and the status, that differ."""
    old_rec, new_rec = old.get("recommendation") or {}, new["recommendation"]
    changes = {key: FieldChange(old=old_rec.get(key), new=new_rec.get(key))
               for key in COMPARED if old_rec.get(key) != new_rec.get(key)}
    if old.get("status") != new["status"]:
        changes["status"] = FieldChange(old=old.get("status"), new=new["status"])
    return changes
