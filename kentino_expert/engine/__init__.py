"""Running a compiled rule set: the backend protocol and registry, forward chaining, the reference and durable
backends, and the compiled evaluator for what-if probes."""
