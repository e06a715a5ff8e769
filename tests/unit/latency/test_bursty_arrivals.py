"""Bursty arrivals (issue 13): the scenario knob, the simulator's gamma gaps, and the planner's
G/G/c prefill-wait law against hand arithmetic (against the replay on hand-written fleets:
tests/integration/test_line_law_vs_replay.py)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.context import load_scenario
from pdd_plan.inputs.profiles import example_path
from pdd_plan.inputs.schema.scenario import Workload
from pdd_plan.latency import closed_forms
from pdd_plan.workload.distributions import sample_requests
from pdd_plan.workload.synthetic import arrival_gaps

W = {"input_tokens": {"fixed": 1000}, "output_tokens": {"fixed": 100}}


@pytest.mark.unit
@pytest.mark.parametrize("law", ["mgc_wait", "ggc_wait ca2=1"])
def test_poisson_case_is_the_textbook_queue(law):
    """With Poisson arrivals both laws give the textbook figures, worked by hand."""

    def wait(c, rate, es, es2):
        if law == "mgc_wait":
            return closed_forms.mgc_wait(c, rate, es, es2)
        return closed_forms.ggc_wait(c, rate, es, es2, 1.0)

    # M/M/1, rho 0.8, E[S] 1 s (exponential: E[S^2] = 2): P(wait) = rho = 0.8,
    # W = rho/(mu - lambda) = 0.8/0.2 = 4 s
    assert wait(1, 0.8, 1.0, 2.0) == pytest.approx((0.8, 4.0), rel=1e-12)
    # M/M/2, lambda 1, mu 1 (a = 1): Erlang C = (a^2/2! * 2/(2-1)) / (1 + 1 + 1) = 1/3,
    # W = C/(c mu - lambda) = 1/3 s
    assert wait(2, 1.0, 1.0, 2.0) == pytest.approx((1 / 3, 1 / 3), rel=1e-12)
    # M/D/1 (E[S^2] = E[S]^2), rho 0.5: Pollaczek-Khinchine W = lambda E[S^2]/(2(1 - rho))
    # = 0.5 * 1/(2 * 0.5) = 0.5 s, half the M/M/1 wait at that load
    assert wait(1, 0.5, 1.0, 1.0) == pytest.approx((0.5, 0.5), rel=1e-12)
    # M/G/3, lambda 2, E[S] 1, E[S^2] 5 (cs2 = 4): a = 2, Erlang C = (8/6 * 3)/(1 + 2 + 2 + 4)
    # = 4/9; Allen-Cunneen (the law's stated approximation) W = C (1 + cs2)/2 E[S]/(c - a)
    # = 4/9 * 2.5 = 10/9 s
    assert wait(3, 2.0, 1.0, 5.0) == pytest.approx((4 / 9, 10 / 9), rel=1e-12)


@pytest.mark.unit
def test_single_server_mean_is_kingman():
    # G/G/1, rho 0.8, E[S] 1 s, cs2 1 (E[S^2] 2), ca2 4: rho/(1-rho) (ca2+cs2)/2 E[S] = 10 s
    pw, mean = closed_forms.ggc_wait(1, 0.8, 1.0, 2.0, 4.0)
    assert mean == pytest.approx(4.0 * 2.5 * 1.0, rel=1e-12)
    # P(wait): QNA, rho + (ca2-1) rho (1-rho) h, h = 4 rho / (ca2 + rho^2 (4 ca2 + cs2))
    h = 4 * 0.8 / (4 + 0.64 * 17)
    assert pw == pytest.approx(0.8 + 3 * 0.8 * 0.2 * h, rel=1e-12)


@pytest.mark.unit
def test_burstier_arrivals_wait_longer_and_more_often():
    last = (0.0, 0.0)
    for ca2 in (0.25, 1.0, 2.0, 4.0, 9.0):
        got = closed_forms.ggc_wait(5, 40.0, 0.11, 0.055, ca2)
        assert got[0] >= last[0] and got[1] > last[1]
        assert 0.0 <= got[0] <= 1.0
        last = got
    assert closed_forms.ggc_wait(5, 50.0, 0.11, 0.055, 4.0) == (1.0, float("inf"))  # a >= c


@pytest.mark.unit
@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0, 3.0])
def test_gaps_have_the_stated_mean_and_cv(cv):
    g = arrival_gaps(400_000, 8.0, cv, np.random.default_rng(1))
    # tolerance: 400,000 seeded gamma gaps: the mean's standard error is cv/sqrt(n) <= 0.5% at cv
    # 3, the CV's <= 0.6% (gamma kurtosis): 2% and 3% are >= 4 SE
    assert g.mean() == pytest.approx(1 / 8.0, rel=0.02)
    assert g.std() / g.mean() == pytest.approx(cv, rel=0.03)


@pytest.mark.unit
def test_poisson_draw_is_unchanged():
    # cv 1 keeps the exact exponential stream the simulator drew before the knob existed
    w = Workload(**W)
    r = sample_requests(w, 1000, 7, 3.0)
    rng = np.random.default_rng(7)
    assert np.array_equal(r.arrival_s, np.cumsum(rng.exponential(1 / 3.0, 1000)))
    b = sample_requests(Workload(**W, arrival_cv=2.0), 1000, 7, 3.0)
    gaps = np.diff(b.arrival_s)
    assert gaps.std() / gaps.mean() > 1.5


@pytest.mark.unit
def test_bad_arrival_cv_is_a_one_line_error(tmp_path):
    data = yaml.safe_load(example_path("pdd-paper").read_text())
    for bad, what in [(0, "greater than 0"), (-1, "greater than 0"), (50, "less than or equal")]:
        data["workload"]["arrival_cv"] = bad
        p = tmp_path / "s.yaml"
        p.write_text(yaml.safe_dump(data))
        with pytest.raises(InputError, match=what):
            load_scenario(str(p))
    data["workload"]["arrival_cv"] = 2.0
    data["workload"]["trace"] = "x.jsonl"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="a trace keeps its own"):
        load_scenario(str(p))
