"""Mechanisms behind one interface: SWAN (paper and robust variants) and the baselines."""
