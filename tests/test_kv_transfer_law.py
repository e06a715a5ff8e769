"""The plan's analytic KV-transfer percentiles (issue 13): the bare transfer plus the line's
delay law (pdd_plan/line_delay.py) over the requests that move KV to main decode, against hand
figures and against long replays."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pdd_plan import line_delay
from pdd_plan.optimize import metrics
from pdd_plan.profiles import example_path
from pdd_plan.resolve import load_scenario, resolve
from pdd_plan.schema.plan import ArchitecturePlan
from pdd_plan.sim.run import run
from pdd_plan.workload.classes import build_classes

sys.path.insert(0, str(Path(__file__).parent))
from test_bursty import Caps, solve_architecture  # noqa: E402


@pytest.mark.unit
def test_one_exponential_delay_has_the_closed_form_quantiles():
    # T = 0.2 + Exp(mean 0.5): the q-quantile is 0.2 - 0.5 ln(1 - q)
    got = line_delay.transfer_quantiles(
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
    law = line_delay.two_moment(np.array([0.4]), np.array([0.16 * 1.5]), np.array([0.6]))
    got = line_delay.transfer_quantiles(
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
    two = line_delay.transfer_quantiles(
        np.array([1.0, 3.0]),
        np.zeros(2),
        np.zeros(2),
        np.zeros(2),
        np.array([0.7, 0.3]),
        (0.5, 0.9),
    )
    assert two == pytest.approx([1.0, 3.0], abs=1e-9)
    assert (
        line_delay.transfer_quantiles(
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
    ctx = resolve(load_scenario(path), path)
    cls = build_classes(ctx)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(ctx, "pdd", cls, ctx.scenario.workload.rate_rps, caps)
    s = metrics.summarize(raw, cls, raw.rate, ctx.prefill_dc)
    res = run(ctx, ArchitecturePlan.model_validate(s), "pdd", n)
    kv = res.kv_transfer_s[~np.isnan(res.kv_at_decode_s)]
    an = [s["kv_transfer_s"][k] for k in ("p50", "p90", "p99", "mean")]
    return an, [*(float(np.percentile(kv, q)) for q in (50, 90, 99)), float(kv.mean())]


# The line law is pessimistic where the prefill pool feeds a line one transfer cannot fill (4
# striped connections of 3.36 Gb/s on 18 Gb/s of goodput). Verified with the replay
# (benchmarks/line_input_stream.py, 2026-12-01): the law is right for the line it assumes: fed
# Poisson arrivals and i.i.d. sizes, the same line holds 3.23 transfers in service (law 3.15)
# with sojourn P99 1.03 s (the law's KV P99 0.97 s). The replay's line holds 2.62 (-17%) because
# of the pool's output, not of its gaps: the merged gap SCV is 0.93 (a renewal stream with
# those gaps: 3.06) and a size barely correlates with the merged gap before it (+0.03), but it
# is an affine function of its own prefill service (corr +1.00: both follow the miss tokens),
# so each busy instance emits bytes at a near-constant rate and all six busy emit 0.89 x the
# line's rate. The work offered over 0.3-3 s windows has 0.65-0.87 x a Poisson stream's
# variance (1 at 0.03 s and at 30 s), a big transfer finds 172 MB of work where the rest find
# 254 (Poisson: 296 for both) and the time-average work is 219 MB (Poisson 296). Keeping the
# replay's ready times but shuffling sizes gives 3.44: the size-to-own-service link, which no
# Poisson or renewal law sees, is the whole effect. What would move it: the line's input as c
# sources emitting (service, size) pairs (a marked MAP, or the work-dispersion curve of the
# pool's output at the line's time scale feeding a GI-type workload law).
CAPPED = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="flow-capped line fed by the prefill pool: default (2 x 10G, 75% busy) analytic KV "
    "P50/P90/P99/mean 0.032/0.211/0.973/0.091 s vs a 200k replay's 0.031/0.186/0.698/0.075 "
    "(P90 +14%, P99 +39%, mean +20%); microbenchmark at 40 req/s (20G, 76%) "
    "0.039/0.241/0.958/0.099 vs 0.035/0.203/0.674/0.080 (P90 +19%, P99 +42%, mean +24%); "
    "the replay's line holds 2.62 / 2.80 in service where a Poisson-fed one holds 3.23 / 3.46",
)
# Bursty arrivals on the narrow line (one prefill instance, 23% busy): the stream the line sees
# is renewal (gap SCV 3.59; the replay's line with its gaps shuffled holds 2.44 in service, the
# replay 2.43), and the GI/G/1 workload ratio gets the mean right (-7%), but a PS line fed
# bursts is not the Poisson PS line stretched: the small half of the transfers find it idle
# 11% of the time (28% at cv 1) and their delay's mean is 2.1 x its cv-1 value where the whole
# mean grows 1.4 x, so the median (set by small transfers) reads low. What would move it: a
# size-dependent GI/G/1-PS delay (slope 1 + E[number found] at small sizes, the time-average
# slowdown for long stays).
BURSTY = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="narrow-line, arrival cv 2 (line 62% busy): analytic KV P50/P90/P99/mean "
    "0.368/2.679/17.20/1.307 s vs a 100k replay's 0.539/2.915/15.78/1.404 (-32/-8/+9/-7%)",
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, rate, cv, n",
    [
        ("narrow-line", None, None, 100_000),
        pytest.param("narrow-line", None, 2.0, 100_000, marks=BURSTY),
        pytest.param("pdd-paper", None, None, 200_000, marks=CAPPED),
        pytest.param("wan-microbench", 40.0, None, 100_000, marks=CAPPED),
    ],
)
def test_kv_transfer_law_within_15_percent_of_the_replay(tmp_path, name, rate, cv, n):
    an, sim = _analytic_and_replay(_scenario(tmp_path, name, rate, cv), n)
    for a, s in zip(an, sim):
        assert abs(a / s - 1) <= 0.15, (name, an, sim)


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="microbenchmark at 40 req/s (line 77% busy, prefill 85%): analytic TTFT P50/P90/P99 "
    "0.255/0.980/1.986 s vs a 100k replay's 0.206/0.903/1.737 (+24/+9/+14%); at 30 req/s "
    "(line 58%, prefill 96%) +22/+17/+13%: the flow-capped line's delay (above) and the "
    "prefill pool near its cap (the line's input: see CAPPED's comment)",
)
def test_microbenchmark_ttft_within_15_percent_of_the_replay(tmp_path):
    path = _scenario(tmp_path, "wan-microbench", 40.0)
    ctx = resolve(load_scenario(path), path)
    cls = build_classes(ctx)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(ctx, "pdd", cls, 40.0, caps)
    s = metrics.summarize(raw, cls, raw.rate, ctx.prefill_dc)
    res = run(ctx, ArchitecturePlan.model_validate(s), "pdd", 100_000)
    an = [s["ttft_s"][k] for k in ("p50", "p90", "p99")]
    sim = [float(np.percentile(res.ttft_s, q)) for q in (50, 90, 99)]
    for a, b in zip(an, sim):
        assert abs(a / b - 1) <= 0.15, (an, sim)
