"""``sfenv.world.portable``: the same episodes on every CPU, whatever kernels NumPy and OpenBLAS pick."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np

from sfenv.world.portable import portable_dot, portable_exp, portable_vecmat

TESTS = Path(__file__).resolve().parent


def test_portable_exp_is_math_exp_element_by_element() -> None:
    x = np.random.default_rng(1).standard_normal((3, 7)) * 5.0
    y = portable_exp(x)
    assert y.shape == x.shape and y.dtype == np.float64
    assert all(y[i, j] == math.exp(x[i, j]) for i in range(3) for j in range(7))
    assert portable_exp(0.5).shape == () and float(portable_exp(0.5)) == math.exp(0.5)


def test_portable_dot_is_the_correctly_rounded_sum_of_the_rounded_products() -> None:
    rng = np.random.default_rng(2)
    for n in (1, 3, 8, 17, 64):
        a, b = rng.random(n) * 1e4, rng.standard_normal(n) * 1e-3
        exact = sum((Fraction(float(x) * float(y)) for x, y in zip(a, b, strict=True)), Fraction(0))
        assert portable_dot(a, b) == float(exact)  # fsum rounds the exact sum once
    assert portable_dot(np.zeros(0), np.zeros(0)) == 0.0


def test_portable_vecmat_adds_the_weighted_rows_in_order() -> None:
    rng = np.random.default_rng(3)
    for n, cols in ((5, 7), (64, 25), (200, 2)):
        w, rows = rng.random(n) * 1e3, rng.random((n, cols + 1))[:, 1:]  # a column slice, as the observation's
        expected = np.zeros(cols)
        for i in range(n):
            expected = expected + w[i] * rows[i]
        got = portable_vecmat(w, rows)
        assert got.shape == (cols,) and np.array_equal(got, expected)
        np.testing.assert_allclose(got, w @ rows, rtol=1e-12)


_PLAY = """
import json, sys
sys.path.insert(0, sys.argv[1])
import episode_identity as ei
cases = {label: (env_id, kw) for label, env_id, kw in ei.cases()}
out = {label: ei.play(*cases[label], 0) for label in json.loads(sys.argv[2])}
out["agent:spinsearch"] = ei.play_agent("spinsearch", 0)
print(json.dumps(out))
"""


def test_episodes_are_the_same_with_numpy_s_avx512_kernels_off() -> None:
    """The same episodes, bit for bit, from NumPy and OpenBLAS with and without their AVX-512 kernels.

    On an AVX-512 machine the second run takes NumPy's AVX2 code paths (``NPY_DISABLE_CPU_FEATURES``)
    and OpenBLAS's Haswell kernels (``OPENBLAS_CORETYPE``), as an older CPU would; NumPy's ``np.exp``
    differs from the AVX-512 one in the last bit, which used to reach prices and cost.
    A third run takes OpenBLAS's SSE3 kernels (``Prescott``), which sum a dot product in another order
    than the Haswell and AVX-512 ones on any x86-64 CPU: the platform's cost and carbon in ``info`` took
    their last bits from ``np.dot`` until :func:`sfenv.world.portable.portable_dot` (2026-11-28).
    """
    labels = ["sfenv/Spider8Contended-v6", "sfenv/Geo8Carbon-v6", "work-conserving"]
    runs = []
    settings = [("", None), ("X86_V4", "Haswell")]
    if platform.machine() in ("x86_64", "AMD64"):
        settings.append(("", "Prescott"))
    for disabled, blas in settings:
        env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled}
        if blas is not None:  # OpenBLAS's AVX2 kernels (its DYNAMIC_ARCH build picks them by CPU otherwise)
            env["OPENBLAS_CORETYPE"] = blas
        done = subprocess.run([sys.executable, "-c", _PLAY, str(TESTS), json.dumps(labels)], env=env,
                              capture_output=True, text=True, timeout=300, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert all(run == runs[0] for run in runs[1:])
