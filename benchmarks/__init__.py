"""Side-by-side benchmarks against peer implementations; run with ``python -m benchmarks``."""
