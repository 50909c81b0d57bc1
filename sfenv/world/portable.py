"""Floating-point operations whose result is the same float on every machine.

NumPy picks some kernels at run time by CPU: ``np.exp`` on float64 has an AVX-512 implementation and
an AVX2 one that differ in the last bit (NumPy 2.4; seen on an AVX-512 machine by setting
``NPY_DISABLE_CPU_FEATURES=X86_V4``; ``np.log`` and ``np.power`` too).  Prices, carbon forecasts and
generated links computed with it made the same seed give another episode's last bits on another CPU:
the bundled leaderboard entries, recorded on an AVX2 machine, failed their replay on an AVX-512 one.
:func:`portable_exp` uses Python's :func:`math.exp` (the C library's, no SIMD dispatch), which gives
the floats those entries and ``tests/data/episode_identity.json`` were recorded with.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["portable_exp"]


def portable_exp(x: np.ndarray | float) -> np.ndarray:
    """``exp`` of every element of ``x`` by :func:`math.exp`, as a float64 array of ``x``'s shape."""
    arr = np.asarray(x, dtype=float)
    return np.fromiter(map(math.exp, arr.ravel().tolist()), dtype=float, count=arr.size).reshape(arr.shape)
