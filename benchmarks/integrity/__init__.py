"""Attacks on the platform for tests and ``make bench-integrity`` (never shipped in an image)."""
