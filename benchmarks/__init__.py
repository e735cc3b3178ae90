"""The benchmark (`python -m benchmarks.bench` from a checkout); not part of the installed package."""
