"""The backend protocol and registry: each backend brings its name, version, reserved names and shape check,
and an answer names the backend that gave it."""
from __future__ import annotations

import pytest

import hostile_rules as hostile
from kentino_expert.domain.catalog import load_knowledge
from kentino_expert.engine.durable.engine import DurableEngine
from kentino_expert.engine.reference import ReferenceEngine
from kentino_expert.engine.registry import BACKENDS, backend_class
from kentino_expert.errors import EngineError, RuleFileError
from kentino_expert.expert import Expert
from kentino_expert.paths import bundled
from kentino_expert.rulecheck import check_directory
from kentino_expert.ruleset.compiler import compile_ruleset

FACTS = {"task": "inference", "model": "llama-3.1-70b", "concurrency": 48}
SHAPE_CODES = {"E201", "E202", "E203", "E204", "E205"}


def test_the_registry_names_both_backends():
    """"durable" and "reference" resolve to their classes; each class's name is its key."""
    assert backend_class("durable") is DurableEngine and backend_class("reference") is ReferenceEngine
    assert all(cls.name == name for name, cls in BACKENDS.items())


def test_an_unknown_backend_is_refused_with_a_suggestion():
    """A misspelt backend is an EngineError naming the known ones, not a silent fallback to another engine."""
    with pytest.raises(EngineError, match="unknown backend 'durabel'") as info:
        Expert(backend="durabel")
    assert info.value.suggestion == "durable" and "reference" in info.value.message


def test_each_answer_names_the_backend_that_gave_it(expert, reference_expert):
    """The same facts: the same recommendation and digest, and ruleset.engine is each backend's own version."""
    durable, reference = expert.recommend(FACTS), reference_expert.recommend(FACTS)
    assert durable.recommendation == reference.recommendation and durable.ruleset.digest == reference.ruleset.digest
    assert durable.ruleset.engine == DurableEngine.version and reference.ruleset.engine == ReferenceEngine.version
    assert DurableEngine.version != ReferenceEngine.version


def test_shape_problems_are_the_backends_own(tmp_path):
    """A rule durable-rules cannot run (an always-true `or` of 65 branches) is refused for durable, by `rules
    check` and by compiling; the reference evaluator has no such limit: it loads the rules and answers."""
    rules = hostile.always_true(tmp_path, 65)
    refused = check_directory(rules.directory).errors
    assert refused and {d.code for d in refused} <= SHAPE_CODES and {d.rule for d in refused} == {"always-true-or"}
    knowledge = load_knowledge(bundled("knowledge"))
    with pytest.raises(RuleFileError, match="always-true-or"):
        compile_ruleset(rules.directory, knowledge, backend=DurableEngine)
    reference = Expert(rules.directory, backend="reference")
    assert "always-true-or" in [step.rule for step in reference.recommend(FACTS).trace]
    assert not DurableEngine.shape_problems(compile_ruleset(bundled("rules"), knowledge).rules)


def test_reserved_names_are_the_backends_own(tmp_path):
    """Concluding `sid` (a property of durable's state fact) is an error for durable only."""
    rules = hostile.hostile_dir(tmp_path, "reserved", [hostile.rule_text("concludes-sid", "params_b > 1")])
    text = (rules.directory / hostile.FILE).read_text().replace("      warn: {code: concludes-sid, message: hostile}",
                                                                "      conclude: {sid: 1}")
    (rules.directory / hostile.FILE).write_text(text)
    knowledge = load_knowledge(bundled("knowledge"))
    with pytest.raises(RuleFileError, match="cannot conclude 'sid': it is a property the engine uses itself"):
        compile_ruleset(rules.directory, knowledge, backend=DurableEngine)
    assert "sid" in DurableEngine.reserved_names and ReferenceEngine.reserved_names == ()
    compile_ruleset(rules.directory, knowledge, backend=ReferenceEngine)
