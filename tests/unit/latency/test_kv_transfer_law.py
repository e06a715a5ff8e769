"""The plan's analytic KV-transfer percentiles: the bare transfer plus the line's delay law
(pdd_plan/latency/line/delay_shape.py), against hand figures (against the replay on
hand-written fleets: tests/integration/test_line_law_vs_replay.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.latency.line import delay_shape


@pytest.mark.unit
def test_one_exponential_delay_has_the_closed_form_quantiles():
    # T = 0.2 + Exp(mean 0.5): the q-quantile is 0.2 - 0.5 ln(1 - q)
    got = delay_shape.transfer_quantiles(
        np.array([0.2]),
        np.array([0.5]),
        np.array([0.25]),
        np.array([0.0]),
        np.array([1.0]),
        (0.5, 0.9, 0.99),
    )
    want = [0.2 - 0.5 * math.log(1 - q) for q in (0.5, 0.9, 0.99)]
    assert got == pytest.approx(want, rel=1e-9)


@pytest.mark.unit
def test_atom_and_mixture_quantiles():
    # 60% see no delay: the median is the bare time; above, shift + exponential of the rest
    law = delay_shape.two_moment(np.array([0.4]), np.array([0.16 * 1.5]), np.array([0.6]))
    got = delay_shape.transfer_quantiles(
        np.array([0.1]),
        np.array([0.4]),
        np.array([0.24]),
        np.array([0.6]),
        np.array([1.0]),
        (0.5, 0.99),
    )
    q, s, k = float(law.q[0]), float(law.shift[0]), float(law.scale[0])
    assert got[0] == pytest.approx(0.1, abs=1e-9) and q == pytest.approx(0.4)
    assert got[1] == pytest.approx(0.1 + s + k * math.log(q / 0.01), rel=1e-9)
    # a two-entry mixture with no delay: the weighted quantiles of the bare times
    two = delay_shape.transfer_quantiles(
        np.array([1.0, 3.0]),
        np.zeros(2),
        np.zeros(2),
        np.zeros(2),
        np.array([0.7, 0.3]),
        (0.5, 0.9),
    )
    assert two == pytest.approx([1.0, 3.0], abs=1e-9)
    assert (
        delay_shape.transfer_quantiles(
            np.ones(2), np.ones(2), np.ones(2), np.zeros(2), np.zeros(2), (0.5,)
        )
        is None
    )
