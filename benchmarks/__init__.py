"""Harnesses that measure speed and accuracy (python -m benchmarks.NAME); figures in BENCHMARKS.md."""
