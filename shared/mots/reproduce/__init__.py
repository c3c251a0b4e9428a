"""Reproduction of the paper's evaluation (Section 5): network effects, SWAN against the baselines, MoTS against FL.

`mots reproduce` (and `make reproduce`) runs :func:`mots.reproduce.pipeline.run_reproduction`.
"""
