"""Floating-point operations whose result is the same float on every machine.

NumPy picks some kernels at run time by CPU: ``np.exp`` on float64 has an AVX-512 implementation and
an AVX2 one that differ in the last bit (NumPy 2.4; seen on an AVX-512 machine by setting
``NPY_DISABLE_CPU_FEATURES=X86_V4``; ``np.log`` and ``np.power`` too).  Prices, carbon forecasts and
generated links computed with it made the same seed give another episode's last bits on another CPU:
the bundled leaderboard entries, recorded on an AVX2 machine, failed their replay on an AVX-512 one.
:func:`portable_exp` uses Python's :func:`math.exp` (the C library's, no SIMD dispatch), which gives
the floats those entries and ``tests/data/episode_identity.json`` were recorded with.

``np.dot`` and ``@`` go to the BLAS library NumPy ships (OpenBLAS), which picks its kernel by CPU too:
a dot product of float64 vectors sums in another order with the Sapphire Rapids kernel than with the
Haswell one (``OPENBLAS_CORETYPE=Haswell`` on an AVX-512 machine shows it), so the platform's electricity
cost and carbon in ``info`` differed in the last bit between machines (env v5 bump, 2026-11-28).
:func:`portable_dot` sums the exactly rounded products with :func:`math.fsum` (correctly rounded, no
order to pick); :func:`portable_vecmat` adds a matrix's weighted rows by NumPy's reduction, in their order.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["portable_dot", "portable_exp", "portable_vecmat"]


def portable_exp(x: np.ndarray | float) -> np.ndarray:
    """``exp`` of every element of ``x`` by :func:`math.exp`, as a float64 array of ``x``'s shape."""
    arr = np.asarray(x, dtype=float)
    return np.fromiter(map(math.exp, arr.ravel().tolist()), dtype=float, count=arr.size).reshape(arr.shape)


def portable_dot(a: np.ndarray, b: np.ndarray) -> float:
    """The dot product of two float vectors, the same float on every machine (:func:`math.fsum` of the products)."""
    return math.fsum(np.multiply(a, b, dtype=float).tolist())


def portable_vecmat(weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``weights @ rows`` for a vector and a matrix, the same floats on every machine.

    The weighted rows are added by NumPy's own reduction over the first axis, not by BLAS: with two or
    more columns it adds them row after row, element by element (tested against that order); a single
    column is summed pairwise.  Neither order changes with the CPU.
    """
    return (np.asarray(weights, dtype=float)[:, None] * np.asarray(rows, dtype=float)).sum(axis=0)
