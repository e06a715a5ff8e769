"""The microbenchmark examples run through the CLI and state their replay window (the pool
law: tests/unit/latency/test_line_tcp_pool.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pdd_plan.cli.main import app
from pdd_plan.inputs import profiles

pytestmark = pytest.mark.integration


@pytest.mark.integration
@pytest.mark.parametrize("name", ["wan-microbench.yaml", "wan-microbench-narrow.yaml"])
def test_microbenchmark_example_runs_and_states_its_window(name):
    """The report's microbenchmark (80 req/s on one 20 Gb/s line): the planner has no plan under
    its line cap, simulate replays it anyway and says the line is over capacity, over the
    stated window (here --window 3,000 of --requests 6,000)."""
    path = str(profiles.example_path().parent / name)
    r = CliRunner().invoke(
        app, ["simulate", path, "-f", "json", "--requests", "6000", "--window", "3000"]
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    st = out["stability"]
    assert out["unstable"] is True and st["unstable"] is True
    assert st["offered_gbps"] >= st["capacity_gbps"]
    assert st["capacity_gbps"] == pytest.approx(18.0)  # 20 Gb/s x 0.9, the pool not binding
    assert st["window_requests"] == 3000 and out["requests"] == 3000
    cp = out["connection_pool"]
    assert cp["utilization"] > 1.0 >= cp["occupancy"]
    assert cp["wait_s"]["mean"] > 0 and cp["transfer_s"]["p99"] > 0
    assert "line cap lifted" in out["plan_note"]
