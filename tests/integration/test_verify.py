"""optimize's verification loop: the simulator checks each plan, and the planner re-solves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdd_plan.cli.main import app
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.profiles import example_path
from pdd_plan.optimize import optimize
from pdd_plan.optimize.verify import replay_miss
from pdd_plan.outputs.plan import load_plan
from pdd_plan.sim.verdict import Check, Verdict

pytestmark = pytest.mark.integration


def _plan(name: str) -> dict:
    path = str(example_path(name))
    return optimize(build_context(load_scenario(path), path), sim_requests=20_000).dump()


def test_default_plans_pass_their_simulated_sla():
    plan = _plan("pdd-paper")
    for a, p in plan["plans"].items():
        sim = p["simulated"]
        assert sim["sla_met"], a
        # the analytic M/G/c + PS model and the replay agree on the median within a factor 2
        assert 0.5 < sim["ttft_s"]["p50"] / p["ttft_s"]["p50"] < 2.0, a
        assert sim["ttft_s"]["p99"] <= plan["sla"]["ttft_p99_s"]


def _narrow(tmp_path: Path, **edit) -> Path:
    # P99 15.3 s, not the example's 15: the analytic law passes CDC-PD (14.3 s since the
    # own-prefill silence, pdd_plan/latency/line/found_work.py; it rejected it at 15 s before) and only the
    # replay (15.9 s over 20,000 requests) catches the miss, which these tests need; 15.3 s
    # keeps that so with margin on both sides
    data = yaml.safe_load(example_path("narrow-line").read_text())
    data["sla"]["ttft_p99_s"] = 15.3
    data.update(edit)
    p = tmp_path / "narrow.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_narrow_line_relay_meets_what_direct_transfer_misses(tmp_path):
    # one 1 Gb/s line at 1.8 req/s of 64K DeepSeek-V4-Pro requests: the line's queueing tail
    # breaks CDC-PD's P99 in the replay, even after the re-solve with a tighter line cap; PDD
    # relays enough low-hit requests to meet it
    path = str(_narrow(tmp_path))
    plan = optimize(build_context(load_scenario(path), path), sim_requests=20_000).dump()
    pdd = plan["plans"]["pdd"]
    assert pdd["simulated"]["sla_met"]
    assert pdd["route_share"]["p_rld_md"] > 0
    assert pdd["rld_token_share"] > 0
    # CDC-PD's plan misses in the replay: it is not a plan, it is a reason with the figures
    assert "cdc_pd" not in plan["plans"]
    (why,) = plan["infeasible"]["cdc_pd"]["reasons"]
    assert why["kind"] == "replay_sla" and why["field"] == "sla.ttft_p99_s"
    p99 = float(re.search(r"TTFT P99 ([\d.]+) s > 15.3 s", why["message"]).group(1))
    assert p99 > plan["sla"]["ttft_p99_s"]
    # the P90 is met (its figure moves with the line model: 2.99 s before the TCP line, 3.01 s
    # with it); only the P99 misses
    p90 = float(re.search(r"TTFT P90 ([\d.]+) s <= 10 s", why["message"]).group(1))
    assert 2.0 < p90 <= plan["sla"]["ttft_p90_s"] and "TPOT P90" in why["message"]
    # so no comparison ranks against it; the same-fleet P->MD figure is PDD's own
    assert plan["comparison"]["bcr_gain_vs_cdc_pd"] is None
    assert plan["comparison"]["p90_ttft_reduction_vs_cdc_pd"] > 0.3
    # the analytic tail (M/G/c prefill wait + exponential line queueing) is within 2x of the replay
    assert 0.5 < pdd["simulated"]["ttft_s"]["p99"] / pdd["ttft_s"]["p99"] < 2.0


def test_replay_miss_is_reported_beside_the_others_exit_0(tmp_path):
    out = tmp_path / "plan.yaml"
    r = CliRunner().invoke(
        app, ["optimize", str(_narrow(tmp_path)), "--out", str(out)], env={"COLUMNS": "100"}
    )
    assert r.exit_code == 0, r.output  # README: 1 only when no architecture meets the scenario
    flat = " ".join(r.stdout.split())  # the console wraps long lines
    assert "cdc_pd: misses the SLA in the replay" in flat
    # the replay's P99 (15.9 s with perf v2, 16.1 s with v3) against the 15.3 s target
    assert float(re.search(r"TTFT P99 ([\d.]+) s > 15.3 s", flat).group(1)) > 15.3
    assert "vs CDC-PD - (no plan)" in flat
    plans_table = r.stdout.split("plans", 1)[1].split("\n")[2]  # the architectures' header
    assert "cdc_pd" not in plans_table and "pdd" in plans_table
    plan = load_plan(out)
    assert plan.infeasible["cdc_pd"].reasons[0].kind == "replay_sla"
    js = CliRunner().invoke(app, ["report", str(out), "-f", "json"])
    assert "misses the SLA in the replay" in js.stdout
    md = CliRunner().invoke(app, ["report", str(out), "-f", "markdown"]).stdout
    assert "cdc_pd: misses the SLA in the replay: the simulator replay" in md
    assert "Best BCR: idc_pd" in md


def test_only_replay_misses_exit_1(tmp_path):
    r = CliRunner().invoke(app, ["optimize", str(_narrow(tmp_path, architectures=["cdc_pd"]))])
    assert r.exit_code == 1, r.output
    assert "cdc_pd: no plan meets the scenario: the simulator replay" in r.output
    miss = re.search(r"TTFT P99 ([\d.]+) s > 15.3 s", " ".join(r.output.split()))
    assert float(miss.group(1)) > 15.3 and "Traceback" not in r.output


def test_replay_miss_reason_names_each_check():
    checks = {
        "ttft_p90": Check(12.0, 10.0, False),
        "ttft_p99": Check(14.0, 15.0, True),
        "tpot_p90": Check(70.0, 60.0, False),
    }
    v = Verdict(False, "prefill", checks)
    hist = [{"round": 0}, {"round": 1}]
    why = replay_miss(123.4, v, 5000, hist)
    assert why.kind == "replay_sla" and why.field == "sla.ttft_p90_s"
    m = why.message
    assert "TTFT P90 12 s > 10 s, TPOT P90 70 ms > 60 ms (TTFT P99 14 s <= 15 s)" in m
    assert "$123.4/h" in m and "5,000 requests" in m and "after 1 re-solve(s)" in m
    assert "relax sla.ttft_p90_s, sla.tpot_ms" in m and "bottleneck: prefill" in m
