"""The fixed Talbot inversion (pdd_plan/latency/laplace.py) against transforms inverted by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.latency import laplace

T = np.array([1e-4, 0.01, 0.5, 1.0, 7.0, 100.0, 1e5])


@pytest.mark.unit
def test_talbot_inverts_textbook_transforms():
    # 1 / (s + 1) -> e^-t; 1 / s^2 -> t; 1 / sqrt(s) -> 1 / sqrt(pi t) (a branch cut on the
    # negative axis, as a birth-death chain's continuous spectrum makes)
    # tolerance: 1e-9 relative, the method's double-precision error at 16 nodes (module doc);
    # its error is absolute on the scale of f near t = 0, so a decayed e^-t is held to 1e-11
    e = laplace.talbot(lambda s: 1.0 / (s + 1.0), T[T < 20])
    np.testing.assert_allclose(e, np.exp(-T[T < 20]), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(laplace.talbot(lambda s: 1.0 / (s * s), T), T, rtol=1e-9)
    got = laplace.talbot(lambda s: 1.0 / np.sqrt(s), T)
    np.testing.assert_allclose(got, 1.0 / np.sqrt(math.pi * T), rtol=1e-9)


@pytest.mark.unit
def test_talbot_shape_and_node_count():
    # one value per t, in the order given; a scalar t is one value
    assert laplace.talbot(lambda s: 1.0 / (s * s), 3.0).shape == (1,)
    two = laplace.talbot(lambda s: 1.0 / (s + 2.0), np.array([0.5, 0.25]))
    np.testing.assert_allclose(two, np.exp(-2.0 * np.array([0.5, 0.25])), rtol=1e-9)
    # more nodes: rounding grows as e^(0.4 M), so 32 nodes are no better than 16 here
    e16 = laplace.talbot(lambda s: 1.0 / (s + 1.0), np.array([1.0]), 16)[0]
    e32 = laplace.talbot(lambda s: 1.0 / (s + 1.0), np.array([1.0]), 32)[0]
    assert abs(e16 - math.exp(-1)) <= abs(e32 - math.exp(-1)) * 10
