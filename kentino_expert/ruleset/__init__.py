"""Rule files to a checked, compiled rule set: reading, namespace, compiling, analyses and diagnostics."""
