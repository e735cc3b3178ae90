"""The peer table: the source document's decision flow (12 first-hit rules over the derived state) in CLIPS
(clipspy) and GoRules ZEN (zen-engine), beside a plain Python function and this engine's deciding rules on
the same derived states. The peers are optional (`pip install -e '.[bench-peers]'`); a missing one is skipped
with its reason. The thresholds come from rules/parameters.yaml, as in the rules.
"""
from __future__ import annotations

import json

INFERENCE = ("inference", "batch-inference")
TRAINING = ("lora", "qlora", "full-finetune", "pretraining")


def flow(p: dict) -> list[tuple[str, list[tuple], str]]:
    """The document's flow as (name, [(fact, op, value)], kind) rules, first hit wins; `p`: the parameters.
    op is one of < <= > >= == in, or `missing` (the fact is unknown)."""
    large, cliff, train_max = p["large_model_params_b"], p["cliff_params_b"], p["training_fraction_max"]
    work_max, weights_max, ib_max = p["workload_fraction_max"], p["weights_fraction_max"], p["max_ib_cluster_nodes"]
    return [
        ("pretraining-large-is-frontier", [("task", "==", "pretraining"), ("params_b", ">=", large)], "frontier"),
        ("full-finetune-large-needs-ib", [("task", "==", "full-finetune"), ("params_b", ">=", large),
                                          ("training_state_fraction", ">", train_max)], "multi-node-ib"),
        ("beyond-the-cliff-needs-ib", [("task", "==", "inference"), ("params_b", ">=", cliff),
                                       ("latency", "in", ("production", "interactive"))], "multi-node-ib"),
        ("training-fits-one-node", [("task", "in", TRAINING), ("training_state_fraction", "<=", train_max)],
         "single-node"),
        ("fits-one-node-at-fp8", [("task", "in", INFERENCE), ("workload_fraction_fp8", "<=", work_max),
                                  ("replicas_needed_fp8", "<=", 1)], "single-node"),
        ("fits-one-node-at-int4", [("task", "in", INFERENCE), ("workload_fraction_int4", "<=", work_max),
                                   ("replicas_needed_int4", "<=", 1)], "single-node-int4"),
        ("throughput-bound", [("task", "in", INFERENCE), ("workload_fraction_fp8", "<=", work_max),
                              ("replicas_needed_fp8", ">", 1)], "dp-replicas"),
        ("concurrency-bound", [("task", "in", INFERENCE), ("weights_fraction_fp8", "<=", weights_max),
                               ("dp_replicas_fp8", ">", 1)], "dp-replicas"),
        ("inference-on-a-cluster", [("task", "in", INFERENCE), ("serving_nodes_int4", "<=", ib_max)], "multi-node-ib"),
        ("training-on-a-cluster", [("task", "in", TRAINING), ("training_nodes", "<=", ib_max)], "multi-node-ib"),
        ("size-unknown", [("params_b", "missing", None)], "single-node"),
        ("nothing-fits", [], "frontier"),
    ]


FLOW_INPUTS = ("task", "params_b", "latency", "training_state_fraction", "workload_fraction_fp8",
               "workload_fraction_int4", "replicas_needed_fp8", "replicas_needed_int4", "weights_fraction_fp8",
               "dp_replicas_fp8", "serving_nodes_int4", "training_nodes")


def python_function(p: dict):
    """The flow as a plain Python function of a state mapping (what the peers are measured against)."""
    large, cliff, train_max = p["large_model_params_b"], p["cliff_params_b"], p["training_fraction_max"]
    work_max, weights_max, ib_max = p["workload_fraction_max"], p["weights_fraction_max"], p["max_ib_cluster_nodes"]

    def decide(s):
        task, size = s.get("task"), s.get("params_b")
        training, inference = task in TRAINING, task in INFERENCE
        state_fraction = s.get("training_state_fraction")
        if task == "pretraining" and size is not None and size >= large:
            return "frontier"
        if task == "full-finetune" and size is not None and size >= large and _gt(state_fraction, train_max):
            return "multi-node-ib"
        serving_latency = s.get("latency") in ("production", "interactive")
        if task == "inference" and size is not None and size >= cliff and serving_latency:
            return "multi-node-ib"
        if training and _le(state_fraction, train_max):
            return "single-node"
        if inference:
            fp8, int4 = s.get("workload_fraction_fp8"), s.get("workload_fraction_int4")
            if _le(fp8, work_max) and _le(s.get("replicas_needed_fp8"), 1):
                return "single-node"
            if _le(int4, work_max) and _le(s.get("replicas_needed_int4"), 1):
                return "single-node-int4"
            if _le(fp8, work_max) and _gt(s.get("replicas_needed_fp8"), 1):
                return "dp-replicas"
            if _le(s.get("weights_fraction_fp8"), weights_max) and _gt(s.get("dp_replicas_fp8"), 1):
                return "dp-replicas"
            if _le(s.get("serving_nodes_int4"), ib_max):
                return "multi-node-ib"
        if training and _le(s.get("training_nodes"), ib_max):
            return "multi-node-ib"
        if size is None:
            return "single-node"
        return "frontier"
    return decide


def _le(value, limit) -> bool:
    return value is not None and value <= limit


def _gt(value, limit) -> bool:
    return value is not None and value > limit


def clips_runner(p: dict):
    """(decide(state) -> kind) on CLIPS: reset, assert the state fact, run, read the decision; or the reason
    it is unavailable."""
    try:
        import clips
    except ImportError as exc:
        return None, f"clipspy is not installed ({exc.name}): pip install -e '.[bench-peers]'"
    env = clips.Environment()
    env.build("(deftemplate state " + " ".join(f"(slot {name} (default nil))" for name in FLOW_INPUTS) + ")")
    env.build("(deftemplate decision (slot kind))")
    rules = flow(p)
    for salience, (name, terms, kind) in enumerate(rules):
        slots = " ".join(f"({fact} ?{fact})" for fact in dict.fromkeys(f for f, _, _ in terms))
        tests = " ".join(_clips_test(fact, op, value) for fact, op, value in terms)
        env.build(f"(defrule {name} (declare (salience {len(rules) - salience})) (state {slots}) "
                  f"(not (decision)) {f'(test (and {tests} TRUE))' if tests else ''} => "
                  f"(assert (decision (kind {kind}))))")
    template, decision = env.find_template("state"), env.find_template("decision")

    def decide(state):
        env.reset()
        template.assert_fact(**{name: _clips_value(state.get(name)) for name in FLOW_INPUTS})
        env.run()
        return str(next(iter(decision.facts()))["kind"])
    return decide, None


def _clips_value(value):
    import clips
    if value is None:
        return clips.Symbol("nil")
    return clips.Symbol(value) if isinstance(value, str) else value


def _clips_test(fact: str, op: str, value) -> str:
    var = f"?{fact}"
    if op == "missing":
        return f"(eq {var} nil)"
    if op == "in":
        return "(or " + " ".join(f"(eq {var} {v})" for v in value) + ")"
    if op == "==":
        return f"(eq {var} {value})"
    return f"(and (numberp {var}) ({op} {var} {value}))"


def zen_runner(p: dict):
    """(decide(state) -> kind) on GoRules ZEN: one first-hit decision table; or why it is unavailable."""
    try:
        import zen
    except ImportError as exc:
        return None, f"zen-engine is not installed ({exc.name}): pip install -e '.[bench-peers]'"
    inputs = [{"id": f"in-{name}", "name": name, "field": name} for name in FLOW_INPUTS]
    rows = []
    for index, (_, terms, kind) in enumerate(flow(p)):
        row = {"_id": f"row-{index}", "out-kind": json.dumps(kind)}
        for fact, op, value in terms:
            row[f"in-{fact}"] = _zen_test(op, value)
        rows.append(row)
    table = {"id": "table", "type": "decisionTableNode", "name": "flow", "position": {"x": 0, "y": 0},
             "content": {"hitPolicy": "first", "inputs": inputs, "rules": rows,
                         "outputs": [{"id": "out-kind", "name": "kind", "field": "kind"}]}}
    graph = {"nodes": [{"id": "in", "type": "inputNode", "name": "in", "position": {"x": 0, "y": 0}}, table,
                       {"id": "out", "type": "outputNode", "name": "out", "position": {"x": 0, "y": 0}}],
             "edges": [{"id": "e1", "sourceId": "in", "targetId": "table", "type": "edge"},
                       {"id": "e2", "sourceId": "table", "targetId": "out", "type": "edge"}]}
    decision = zen.ZenEngine().create_decision(json.dumps(graph))

    def decide(state):
        return decision.evaluate({name: state[name] for name in FLOW_INPUTS if name in state})["result"]["kind"]
    return decide, None


def _zen_test(op: str, value) -> str:
    if op == "missing":
        return "$ == null"
    if op == "in":
        return ", ".join(json.dumps(v) for v in value)
    if op == "==":
        return json.dumps(value)
    return f"$ != null and $ {op} {value}"
