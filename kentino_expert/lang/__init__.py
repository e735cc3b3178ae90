"""The condition language of rule files: its syntax tree, parser, meaning, types and checks (no eval)."""
