"""The durable-rules backend: the only package that imports durable_rules (its C core)."""
