"""Experiments and benchmarks: runs that reproduce the papers' claims, and speed measurements."""
