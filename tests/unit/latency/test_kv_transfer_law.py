"""The plan's analytic KV-transfer percentiles (issue 13): the bare transfer plus the line's
delay law (pdd_plan/latency/line/delay_shape.py) over the requests that move KV to main decode, against hand
figures and against long replays."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.profiles import example_path
from pdd_plan.latency.line import delay_shape
from pdd_plan.optimize import problem_of, summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.objectives import solve_architecture
from pdd_plan.sim.queues import P_MD
from pdd_plan.sim.run import run
from pdd_plan.workload.classes import build_classes


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


def _scenario(tmp_path: Path, name: str, rate: float | None = None, cv: float | None = None) -> str:
    data = yaml.safe_load(example_path(name).read_text())
    if rate is not None:
        data["workload"]["rate_rps"] = rate
    if cv is not None:
        data["workload"]["arrival_cv"] = cv
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def _analytic_and_replay(path: str, n: int) -> tuple[list[float], list[float]]:
    ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(problem_of(ctx), "pdd", cls, ctx.scenario.workload.rate_rps, caps)
    s = summary.summarize(raw, cls, raw.rate, ctx.prefill_dc)
    res = run(ctx, s, "pdd", n)
    kv = res.kv_transfer_s[~np.isnan(res.kv_at_decode_s)]
    an = [getattr(s.kv_transfer_s, k) for k in ("p50", "p90", "p99", "mean")]
    return an, [*(float(np.percentile(kv, q)) for q in (50, 90, 99)), float(kv.mean())]


# The flow-capped line fed by the prefill pool (4 striped connections of 3.36 Gb/s on 18 Gb/s
# of goodput): the Poisson law was long (KV P50/P90/P99/mean +3/+14/+39/+20% on the default,
# +10/+19/+42/+24% on the microbenchmark at 40 req/s) because the pool smooths the line's input
# (benchmarks/line_input_stream.py: a transfer's size is affine in its own prefill service, so
# c busy instances emit at most c x their byte rate). The pool's index of dispersion for work
# (pdd_plan/latency/line/input_stream.py, Fendick & Whitt 1989) brought the median, P90 and mean within 15%
# but left the P99 +21% / +19%: one ratio for every transfer, where the big transfers (the top
# size decile, which sets the P99) find 172 MB on the line and the rest 254 (Poisson-fed: 296),
# because their own instance was silent through their long prefill. The law now shifts the
# work each class finds by that silence (pdd_plan/latency/line/found_work.py): default 0.030/0.183/0.698/
# 0.075 s vs the 200k replay's 0.031/0.186/0.698/0.075; microbenchmark at 40 req/s 0.035/0.201/
# 0.650/0.080 vs 0.035/0.203/0.674/0.080.

# Bursty arrivals on the narrow line (one prefill instance, line 62% busy in the replay): the
# stream the line sees is renewal (gap SCV 3.59; its gaps shuffled give the same line), but a PS
# line fed bursts is not the Poisson PS line stretched by one workload ratio: the small half of
# the transfers find it idle 16-18% of the time (27-30% at cv 1) and 3.7 others on it (2.2 at
# cv 1), and meet 1.1 arrivals during a 0.27 s stay (0.3 at cv 1), so their mean delay is 4.3 x
# their size where the top decile's is 2.5 x (benchmarks/line_bursts_by_size.py). One ratio
# read 0.369/2.661/16.26/1.271 s (-31/-9/+3/-9%). The law now adds a size-dependent GI/G/1-PS
# excess (pdd_plan/latency/line/bursts.py): slope (work found, the GI/G/1 wait law's E[W], plus the
# rest of the burst met during the stay, from the Gamma renewal function) / m for small
# transfers, the time-average 1 / (1 - rho) plus work conservation's constant for long ones; the
# no-delay chance from P(W = 0); the variance moved by the found work's and the arrivals'
# dispersion: 0.455/3.199/15.74/1.390 s (-16/+10/-0/-1%), every decile's mean delay within 16%.
# That left the median: the small transfers read the number found as E[W] / m (3.0-3.2) where
# the replay finds 3.7-3.8, the burst's earlier members being fresh. The small slope now counts
# the transfers found, lambda E[T] + E[M(T) - lambda T] (each earlier arrival still there while
# its stay outlasts its age; M the renewal function read back from the arrival; 3.77 at the
# plan's QNA gap SCV 3.93, the replay's average 3.54, its small half 3.7-3.8), the ones beyond
# E[W] / m each slowing a transfer by at most its rest, ~E[tau]: 0.506/3.349/15.87/1.452 s
# (-6/+15/+1/+3%; P90 +14.9%, at the edge: its top decile's mean delay reads +4%).
ALL = (0, 1, 2, 3)  # P50, P90, P99, mean


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, rate, cv, n, which",
    [
        ("narrow-line", None, None, 100_000, ALL),
        pytest.param(
            "narrow-line",
            None,
            2.0,
            100_000,
            ALL,
            marks=pytest.mark.xfail(
                strict=True,
                reason="since perf v3's family-aware fit the narrow-line plan changed and the "
                "bursty (cv 2) P90 transfer wait is 16 % above the replay's (3.34 s vs 2.87 s); "
                "the line model's tail under bursts needs a look at this operating point",
            ),
        ),  # fmt: skip
        ("pdd-paper", None, None, 200_000, ALL),
        ("wan-microbench", 40.0, None, 100_000, ALL),
    ],
)
def test_kv_transfer_law_within_15_percent_of_the_replay(tmp_path, name, rate, cv, n, which):
    an, sim = _analytic_and_replay(_scenario(tmp_path, name, rate, cv), n)
    for k in which:
        assert abs(an[k] / sim[k] - 1) <= 0.15, (name, k, an, sim)


# The microbenchmark's TTFT at 40 req/s (6 prefill instances 85% busy, line 77%) read
# +21/+4/-1% (P50/P90/P99: 0.249/0.936/1.726 s vs the 100k replay's 0.206/0.903/1.737). By
# component (benchmarks/ttft_components.py) the prefill wait, the prefill and the KV transfer
# were each within a few percent at every quantile; the first decode step was not: the plan put
# it at the TPOT-target batch (57.4 ms) where the replay makes the first token one step at the
# batch it joins, the operating one (33.6 ms on every request). The operating step is now
# Little's law's, B = x step(B) for an instance decoding x tokens/s (it was u x the full batch,
# 40.1 ms), for TTFT's first step and TPOT alike: 0.225/0.913/1.702 s vs 0.206/0.904/1.737
# (+9/+1/-2%). What is left at the median (components over the replay's kept requests): the M/G/c wait's exponential shape past its atom (+3%: with the replay's own
# service draws the law's wait P50 is 0.037 s vs 0.034, this bimodal service's conditional wait
# has SCV 1.22), the classes' 20,000-request sample (+3%: its strata's E[S] is 0.37% above the
# histogram's exact 0.1273 s) and the replay's wait/rest dependence (+2.5%: its own wait
# shuffled moves its median from 0.207 to 0.212). At 30 req/s (4 instances 96% busy) the
# figures are +19/+16/+13% (0.970/2.941/5.750 vs 0.812/2.534/5.103): the wait law evaluated on
# the replay's own service draws and arrival rate gives its wait within 6% (mean 0.95 vs
# 0.92 s), the rest is the sample's E[S] amplified by 1/(1 - rho) (8% at rho 0.955), and one
# 100k replay's wait there is itself only good to about 10% (its tenths' means span 0.47-1.47 s).
@pytest.mark.slow
def test_microbenchmark_ttft_within_15_percent_of_the_replay(tmp_path):
    path = _scenario(tmp_path, "wan-microbench", 40.0)
    ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(problem_of(ctx), "pdd", cls, 40.0, caps)
    s = summary.summarize(raw, cls, raw.rate, ctx.prefill_dc)
    res = run(ctx, s, "pdd", 100_000)
    an = [getattr(s.ttft_s, k) for k in ("p50", "p90", "p99")]
    sim = [float(np.percentile(res.ttft_s, q)) for q in (50, 90, 99)]
    for a, b in zip(an, sim):
        assert abs(a / b - 1) <= 0.15, (an, sim)
    # the first token: one step at the operating batch, the step TPOT reports
    k = res.kept()
    first = (res.dec.first_s - res.kv_at_decode_s)[k][res.route[k] == P_MD]
    assert float(np.mean(first)) == pytest.approx(s.tpot_ms.p50 / 1e3, rel=0.03)
