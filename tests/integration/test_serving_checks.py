"""benchmarks/serving_checks.py (issue 12): the scenario each `simulate` row's reading
describes, and the rate search. Fast: one tiny replay search; the harness itself is a
benchmark (BENCHMARKS.md), not a test."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from pdd_plan.calibration import fit as cal

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


sc = importlib.import_module("benchmarks.serving_checks")
scen = sc.scen


@pytest.fixture(scope="module")
def rows():
    return {r.row: r for r in scen.simulate_rows()}


# ------------------------------------------------------------------ which rows, read how


def test_every_simulate_row_has_a_check_and_rows_11_to_13_stay_out(rows):
    assert sorted(rows) == sorted(scen.CHECKS) == [22, 24, 26]
    _, aside = cal.read_rows(scen.CSV)
    out = {a.row: a for a in aside if a.use == "out"}
    for row in (11, 12, 13):  # production averages at unknown load: out, with the reason
        assert row in out and "not stated" in out[row].reading


def test_mlperf_server_scenario_is_what_the_reading_says(rows):
    r = rows[22]
    s = scen.scenario(r)
    # MLPerf's llama2-70b Server limits: p99 TTFT 2 s, p99 TPOT 200 ms
    assert (r.check.slo.ttft_p99_s, r.check.slo.tpot_p99_ms) == (2.0, 200.0)
    assert s.sla.ttft_p99_s == 2.0 and s.sla.ttft_p90_s == 2.0 and s.sla.tpot_ms == 200.0
    # OpenOrca mean lengths (row 21's reading), fixed; Poisson arrivals
    assert s.workload.input_tokens.fixed == 294 and s.workload.output_tokens.fixed == 290
    assert s.workload.arrival_cv == 1.0
    # 8 H100 = 4 TP2 engines, one datacenter, IDC-PD
    assert r.engines == 4 and s.datacenters[0].gpus == {"h100": 8}
    assert s.architectures == ["idc_pd"] and s.model == "llama-2-70b"
    ctx = scen.context(r)
    assert ctx.model.weights.dtype == "fp8" and ctx.model.kv_cache.dtype == "fp8"
    g = scen.groups(r, 1, 3)
    assert [(x.role, x.count, x.tp, x.gpus_per_instance) for x in g] == [
        ("prefill", 1, 2, 2),
        ("decode", 3, 2, 2),
    ]


def test_h200_server_and_gptj_ttft_scenarios(rows):
    r = rows[24]
    s = scen.scenario(r)
    assert r.engines == 8 and s.datacenters[0].gpus == {"h200": 8}
    assert s.workload.output_tokens.fixed == 291 and r.check.slo is scen.MLPERF_LLAMA2_SERVER
    t = rows[26]
    s = scen.scenario(t)
    assert t.check.kind == "ttft_alone" and t.check.slo is None
    # one engine in the source; IDC-PD needs a prefill and a decode GPU
    assert s.datacenters[0].gpus == {"a100-80g": 2} and s.workload.input_tokens.fixed == 128
    assert scen.context(t).model.weights.dtype == "bf16"


def test_replay_window_is_mlperfs_minimum_duration():
    assert sc.WINDOW_S == 600.0
    assert sc.requests_for(75.0) == 45_000  # 600 s at 75 req/s
    assert sc.requests_for(0.5) == sc.MIN_REQUESTS


def _summary(ttft_p99: float, tpot_p99: float | None, load: float) -> dict:
    return {
        "ttft_s": {"p99": ttft_p99},
        "tpot_ms": {"p99": tpot_p99},
        "utilization": {"prefill": load},
    }


def test_slo_verdict_on_p99_and_stability():
    slo = scen.MLPERF_LLAMA2_SERVER
    assert sc.slo_met(_summary(2.0, 200.0, 0.9), slo)  # at the limits: met
    assert not sc.slo_met(_summary(2.001, 100.0, 0.9), slo)
    assert not sc.slo_met(_summary(0.5, 200.5, 0.9), slo)
    assert sc.slo_met(_summary(0.5, None, 0.9), slo)  # one-token outputs have no TPOT
    assert not sc.slo_met(_summary(0.5, 100.0, 1.0), slo)  # prefill saturated: no steady state


# ------------------------------------------------------------------ the rate search


@pytest.mark.parametrize("start", [0.3, 7.0, 55.0, 1e4])
@pytest.mark.parametrize("threshold", [1.0, 13.7, 600.0])
def test_max_rate_brackets_a_threshold(start, threshold):
    s = sc.max_rate(lambda r: r <= threshold, start, rel_tol=0.01)
    assert s.passed is not None and s.failed is not None
    assert s.passed <= threshold < s.failed
    assert s.failed <= s.passed * 1.01 * (1 + 1e-12)
    assert all(ok == (r <= threshold) for r, ok in s.runs)


def test_max_rate_is_monotone_in_the_threshold():
    got = [sc.max_rate(lambda r, t=t: r <= t, 10.0).passed for t in (2.0, 5.0, 9.0, 30.0)]
    assert got == sorted(got)


def test_max_rate_when_nothing_passes_or_everything_does():
    s = sc.max_rate(lambda r: False, 10.0, max_runs=50)
    assert s.passed is None and s.failed is not None and s.runs[-1][0] < 1e-5
    s = sc.max_rate(lambda r: True, 1.0, max_runs=5)
    assert s.failed is None and s.passed == 16.0 and len(s.runs) == 5


def test_rate_search_on_a_tiny_replay(rows):
    """GPT-J on one A100 prefill + one decode engine, a tight SLO, 300 requests: the search
    ends on a passing rate one step below a failing one, and the replay's verdict over a grid
    of rates around it is monotone (passes, then fails)."""
    slo = sc.SLO(0.1, 50.0, "test")
    r = dataclasses.replace(rows[26], check=scen.Check("rate_at_slo", slo, "test"))
    ctx = scen.context(r)
    gs = scen.groups(r, 1, 1)

    def meets(rate: float) -> bool:
        return sc.slo_met(sc.run(ctx, scen.plan(gs, rate), "idc_pd", 300, 0).summary(), slo)

    s = sc.max_rate(meets, sc.capacity_rps(ctx, r, 1, 1), rel_tol=0.05)
    assert s.passed is not None and s.failed is not None
    assert meets(s.passed) and not meets(s.failed)
    assert s.failed <= s.passed * 1.05 * (1 + 1e-12)
    verdicts = [meets(s.passed * k) for k in (0.25, 0.5, 0.8, 1.0, 1.2, 1.6, 2.5)]
    assert verdicts == sorted(verdicts, reverse=True)  # True... then False...
    # the search never passes past the perf model's no-queueing capacity bound
    assert s.passed < sc.capacity_rps(ctx, r, 1, 1) * 1.01
