"""Tools for rule authors: scenario tests, rule-change impact, rule pages."""
