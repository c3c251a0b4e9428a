"""Benchmarks of the MoTS platform, each runnable as ``python -m benchmarks.<name>``."""
