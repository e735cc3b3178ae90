"""The world the rules reason about: workload facts, the knowledge catalog, sizing, scaling and the derived state."""
