"""``sfenv.world.portable``: the same episodes on every CPU, whatever kernels NumPy and OpenBLAS pick."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from sfenv.world.portable import portable_exp

TESTS = Path(__file__).resolve().parent


def test_portable_exp_is_math_exp_element_by_element() -> None:
    x = np.random.default_rng(1).standard_normal((3, 7)) * 5.0
    y = portable_exp(x)
    assert y.shape == x.shape and y.dtype == np.float64
    assert all(y[i, j] == math.exp(x[i, j]) for i in range(3) for j in range(7))
    assert portable_exp(0.5).shape == () and float(portable_exp(0.5)) == math.exp(0.5)


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
    On a machine without AVX-512 both runs take the same paths and the test holds trivially.
    """
    labels = ["sfenv/Spider8Contended-v4", "sfenv/Geo8Carbon-v4", "work-conserving"]
    runs = []
    for disabled, blas in (("", None), ("X86_V4", "Haswell")):
        env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": disabled}
        if blas is not None:  # OpenBLAS's AVX2 kernels (its DYNAMIC_ARCH build picks them by CPU otherwise)
            env["OPENBLAS_CORETYPE"] = blas
        done = subprocess.run([sys.executable, "-c", _PLAY, str(TESTS), json.dumps(labels)], env=env,
                              capture_output=True, text=True, timeout=300, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1]
