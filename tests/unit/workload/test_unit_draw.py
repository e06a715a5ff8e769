"""A distribution's requests drawn before their rate (`unit_draw`, `at_rate`): numpy's
``exponential(scale)`` and ``gamma(shape, scale)`` are ``scale`` times the standard draws of the
same stream, so the gaps may be scaled after the draw, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.inputs.schema.scenario import Workload
from pdd_plan.workload.distributions import at_rate, sample, sample_requests, unit_draw
from pdd_plan.workload.synthetic import arrival_gaps

pytestmark = pytest.mark.unit

W = {
    "rate_rps": 3.0,
    "input_tokens": {"lognormal": {"mu": 7.0, "sigma": 1.0, "min": 16, "max": 32768}},
    "output_tokens": {"fixed": 300},
    "prefix_hit": {"histogram": [[0.0, 0.5, 0.3], [0.5, 1.0, 0.7]]},
}


@pytest.mark.parametrize("cv", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("rate", [0.37, 12.0, 4321.5])
def test_gaps_are_numpys_draws_at_the_rate(cv, rate):
    got = arrival_gaps(5000, rate, cv, np.random.default_rng(11))
    rng = np.random.default_rng(11)
    if cv == 1.0:
        want = rng.exponential(1.0 / rate, size=5000)
    else:
        shape = 1.0 / cv**2
        want = rng.gamma(shape, 1.0 / (rate * shape), size=5000)
    assert np.array_equal(got, want)
    assert abs(got.mean() * rate - 1.0) < 0.1  # mean gap 1/rate (sd of the mean <= 2/sqrt(5000))


@pytest.mark.parametrize("cv", [1.0, 1.5])
def test_requests_drawn_before_their_rate_are_the_requests_at_it(cv):
    w = Workload(**W, arrival_cv=cv)
    # the draw order from one stream: input, output, hit, then the gaps at the rate
    rng = np.random.default_rng(7)
    inp = np.maximum(np.round(sample(w.input_tokens, 2000, rng)), 1).astype(np.int64)
    sample(w.output_tokens, 2000, rng)
    hit = np.clip(sample(w.prefix_hit, 2000, rng), 0.0, 1.0)
    arrivals = np.cumsum(arrival_gaps(2000, 3.0, cv, rng))
    d = unit_draw(w, 2000, 7)
    for rate in (3.0, 0.25, 40.0):
        r = at_rate(d, rate)
        s = sample_requests(w, 2000, 7, rate)
        for f in ("arrival_s", "input_tokens", "output_tokens", "hit_p", "hit_d"):
            assert np.array_equal(getattr(r, f), getattr(s, f)), (rate, f)
        # arrivals scale with the rate exactly as the gaps do (each gap scaled, then summed)
        assert np.allclose(r.arrival_s * rate, arrivals * 3.0, rtol=1e-12)
    assert np.array_equal(at_rate(d, 3.0).arrival_s, arrivals)
    assert np.array_equal(d.input_tokens, inp) and np.array_equal(d.hit, hit)
    assert r.hit_d is not r.hit_p  # hit_d is the replay's to change, never the draw's


@pytest.mark.parametrize("rate", [0.0, -2.0, float("nan")])
def test_a_rate_that_is_not_positive_is_refused(rate):
    with pytest.raises(ValueError, match="rate must be > 0"):
        arrival_gaps(10, rate, 1.0, np.random.default_rng(0))
