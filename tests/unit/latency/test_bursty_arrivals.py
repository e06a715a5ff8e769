"""Bursty arrivals (issue 13): the scenario knob, the simulator's gamma gaps, and the planner's
G/G/c prefill-wait law against hand arithmetic and against the replay."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.profiles import example_path
from pdd_plan.inputs.schema.scenario import Workload
from pdd_plan.latency import closed_forms
from pdd_plan.optimize import problem_of, summary
from pdd_plan.optimize.search.caps import Caps
from pdd_plan.optimize.search.objectives import solve_architecture
from pdd_plan.sim.run import run
from pdd_plan.workload.classes import build_classes
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


def _scenario(tmp_path, name: str, cv: float, decode_utilization: float | None = None) -> str:
    data = yaml.safe_load(example_path(name).read_text())
    data["workload"]["arrival_cv"] = cv
    if decode_utilization is not None:
        data.setdefault("search", {})["decode_utilization"] = decode_utilization
    p = tmp_path / f"{name}-{cv}.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def _analytic_and_replay(path: str, arch: str, n: int) -> tuple[list[float], list[float]]:
    """The plan's TTFT P50/P90/P99 as the planner predicts them, and a long replay's."""
    ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(problem_of(ctx), arch, cls, ctx.scenario.workload.rate_rps, caps)
    s = summary.summarize(raw, cls, raw.rate, ctx.prefill_dc)
    res = run(ctx, s, arch, n)
    an = [getattr(s.ttft_s, k) for k in ("p50", "p90", "p99")]
    return an, [float(np.percentile(res.ttft_s, q)) for q in (50, 90, 99)]


# A long replay: at the default plan's 84%-busy prefill pool the 20,000-request verification
# window (500 s, starting empty) sees a P99 prefill wait well under the steady state, so the
# comparison needs a window long against the queue's relaxation time. 200,000 requests are not
# enough at cv 2 (gamma gaps of shape 1/4): that window's arrivals ran at 39.49 req/s for 40
# planned and its TTFT P50/P90/P99 were 0.273/0.959/1.666 s, where 1M and 2M requests give
# 0.311/1.112/2.167 and 0.300/1.052/2.037 s. A million requests take ~3 s to replay.
LONG = 1_000_000


@pytest.mark.slow
# cv 2 was a strict xfail after the FP4-rate refit (a 7-instance pool, P99 +16 %); with the
# rounded GEMM roofline the default plans a 6-instance pool and it is within 15 % again
@pytest.mark.parametrize("cv", [1.0, 2.0])
def test_default_prefill_law_within_15_percent_of_the_replay(tmp_path, cv):
    # IDC-PD on the default scenario with its decode held off its cap (decode_utilization 0.9),
    # so the prefill pool is the only queue and this checks the G/G/c wait law
    # (pdd_plan.latency.prefill.gigc) end to end. At the default's cap of 1 the one decode
    # instance runs at its batch limit and the 1M replay's TTFT P50/P90/P99 read 0.21/1.12/2.57 s
    # against the law's 0.17/0.84/1.46 s: decode admission waits the analytic TTFT does not carry
    # (at 0.9 the two agree within 3 %). That gap is a finding, not this test's subject.
    path = _scenario(tmp_path, "pdd-paper", cv, decode_utilization=0.9)
    an, sim = _analytic_and_replay(path, "idc_pd", LONG)
    for a, s in zip(an, sim):
        assert abs(a / s - 1) <= 0.15, (cv, an, sim)


@pytest.mark.slow
@pytest.mark.parametrize("cv", [1.0, 2.0])
def test_narrow_line_within_15_percent_of_the_replay(tmp_path, cv):
    # one prefill instance at rho 0.23 (the exact GI/G/1 wait, pdd_plan/latency/prefill/gig1.py) feeding a
    # line 64% busy at the load its routing makes (singular relayed requests stay off it),
    # whose queueing grows with the burstiness the prefill passes on
    an, sim = _analytic_and_replay(_scenario(tmp_path, "narrow-line", cv), "pdd", 100_000)
    for a, s in zip(an, sim):
        assert abs(a / s - 1) <= 0.15, (cv, an, sim)
