"""``zone_dot``: the zones' sum rounded once, whatever BLAS kernel the machine's CPU would pick for ``np.dot``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from sfenv.world.prices import zone_dot


def test_zone_dot_is_the_exact_sum_rounded_once() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 3, 8, 20, 64):
        for _ in range(50):
            weights = rng.random(n) * 1e4
            values = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 12, n)
            exact = sum((Fraction(float(w * v)) for w, v in zip(weights, values)), Fraction(0))
            assert zone_dot(weights, values) == float(exact)


def test_an_order_dependent_sum_is_not_order_dependent() -> None:
    """A running sum loses the 1 in some orders (1e16 + 1 rounds to 1e16); the result does not depend on the order."""
    weights = np.ones(3)
    for values in ([1e16, 1.0, -1e16], [1.0, 1e16, -1e16], [-1e16, 1e16, 1.0]):
        assert zone_dot(weights, np.array(values)) == 1.0
