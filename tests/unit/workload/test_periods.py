"""The day's periods as the planner reads them (workload/periods.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize.day.elastic import run_hours
from pdd_plan.workload.periods import build_day, reweighted

ROOT = Path(__file__).resolve().parents[3]
TRACE_SCENARIO = """
name: mooncake-5min
model: llama-3.1-70b
workload:
  trace: traces/mooncake_conversation_trace.jsonl
  periods_from_trace: {period_minutes: 5, start_hour: 9}
datacenters:
  - {name: a, gpus: {h100: 64}}
sla: {ttft_p90_s: 5, ttft_p99_s: 10, tpot_ms: 60}
architectures: [idc_pd]
"""


@pytest.fixture(scope="module")
def trace_day(tmp_path_factory):
    d = tmp_path_factory.mktemp("day")
    f = d / "s.yaml"
    f.write_text(TRACE_SCENARIO)
    (d / "traces").symlink_to(ROOT / "examples" / "traces")
    return build_day(build_context(load_scenario(str(f)), str(f)).class_spec)


@pytest.mark.unit
def test_five_minute_periods_cut_from_the_trace_hold_all_its_requests(trace_day):
    # the Mooncake conversation trace: 12,031 requests over 3,537 s (traces/SOURCES.md):
    # 12 periods of 300 s, the last about 237 s (the reader spreads the 3 s ticks a little)
    ps = trace_day.periods
    assert len(ps) == 12
    assert ps[0].start_hour == 9 and ps[1].start_hour == pytest.approx(9 + 5 / 60)
    # tolerance: 5 s: the reader spreads the 3 s ticks (the comment above), moving the last
    # period's end
    assert ps[-1].hours * 3600 == pytest.approx(237, abs=5)
    total = sum(p.rate_rps * p.hours * 3600 for p in ps)
    # tolerance: 0.5: a whole number of requests, float sums of rate x hours
    assert total == pytest.approx(12031, abs=0.5)
    for p in ps:
        assert p.class_weight.sum() == pytest.approx(1.0) and np.all(p.class_weight >= 0)
    # the mix moves: not every period has the trace's mix
    spread = np.ptp(np.vstack([p.class_weight for p in ps]), axis=0)
    assert spread.max() > 0.01


@pytest.mark.unit
def test_the_example_day_weights_its_classes_by_requests():
    f = str(ROOT / "examples" / "a-day.yaml")
    ctx = build_context(load_scenario(f), f)
    day = build_day(ctx.class_spec)
    assert len(day.periods) == 24 and day.hours == 24
    # by hand: 40 req/s x the 24 multipliers' sum 16.8 / 24 h = 28.0 exactly (pytest.approx's
    # default rel 1e-6 is float summation only)
    assert day.peak_rps == 40 and day.mean_rps == pytest.approx(28.0)
    # the pooled mix is each period's mix weighted by its requests
    w = np.array([p.rate_rps * p.hours for p in day.periods])
    pooled = sum(wk * p.class_weight for wk, p in zip(w, day.periods)) / w.sum()
    assert np.allclose(day.classes.weight, pooled, atol=0.02)
    # night (00-06 h): half the requests hit above 99% (the example's published swing)
    night = reweighted(day.classes, day.periods[2].class_weight)
    noon = reweighted(day.classes, day.periods[12].class_weight)
    assert float(night.weight @ night.hit_p) > float(noon.weight @ noon.hit_p)


@pytest.mark.unit
def test_run_hours_round_startup_and_drain_up_to_the_billing_unit():
    f = str(ROOT / "examples" / "a-day.yaml")
    ctx = build_context(load_scenario(f), f)
    day = build_day(ctx.class_spec)
    el = ctx.scenario.elastic
    dp = SimpleNamespace(elastic=el, pb=SimpleNamespace(policy=ctx.scenario.policy))

    class Cand:
        role, step_s = "main_decode", 0.05

    # 10 min start-up + ~960 tokens x 50 ms drain (~0.8 min) -> one 60-min unit
    assert run_hours(dp, day, day.classes, Cand()) == pytest.approx(1.0)
    dp1 = SimpleNamespace(elastic=el.model_copy(update={"billing_minutes": 1.0}), pb=dp.pb)
    drain_min = float(day.classes.weight @ day.classes.output_tokens) * 0.05 / 60
    assert run_hours(dp1, day, day.classes, Cand()) * 60 == pytest.approx(
        np.ceil(10 + drain_min), abs=1e-9
    )
