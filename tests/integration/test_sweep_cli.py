"""`pdd-plan sweep` through the CLI: executors agree, rate sweeps are monotone with Pareto
flags, bad options are one line (unit side: tests/unit/sweep/test_sweep.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_plan.cli.main import app
from pdd_plan.sweep.executors import run_all
from pdd_plan.sweep.pareto import pareto_indices
from tests.cli_helpers import err_line, runner
from tests.unit.sweep.test_sweep import _square  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


ROOT = Path(__file__).resolve().parents[2]


EXAMPLE = str(ROOT / "examples" / "pdd-paper.yaml")


RATES = "workload.rate_rps=20:60:20"


def invoke(*args: str):
    return runner().invoke(app, ["sweep", *args])


def _ok(r) -> str:
    assert r.exit_code == 0, (r.output, getattr(r, "stderr", ""))
    return r.stdout


@pytest.mark.integration
@pytest.mark.parametrize(
    "spec, words",
    [
        ("sla.ttft_p90_s=1:0:1", ["--vary sla.ttft_p90_s"]),
        ("nope=1:2:1", ["--vary nope", "unknown key"]),
        ("sla.ttft_p90_s=a:b:c", ["--vary sla.ttft_p90_s"]),
        ("sla.ttft_p90_s=5:20:5", ["--vary sla.ttft_p90_s", "ttft_p99_s must be >= ttft_p90_s"]),
        ("workload.rate_rps=0:10:5", ["--vary workload.rate_rps", "greater than 0"]),
        ("link.max_lines=1:2:0.5", ["--vary link.max_lines", "integer"]),
        ("prices.h999=1:2:1", ["--vary prices.h999", "no datacenter lists"]),
        ("policy.nope=1:2:1", ["--vary policy.nope", "unknown key"]),
    ],
)
def test_cli_bad_vary_is_one_line_exit_2(spec, words):
    r = invoke(EXAMPLE, "--vary", spec, "--executor", "serial")
    assert r.exit_code == 2
    line = err_line(r)
    assert all(w in line for w in words), line


@pytest.mark.integration
@pytest.mark.parametrize(
    "args, words",
    [
        ((), ["--vary", "nothing to vary"]),
        (("--vary", RATES, "--format", "yaml"), ["--format"]),
        (("--vary", RATES, "--executor", "gpu"), ["--executor", "unknown executor"]),
        (("--vary", RATES, "--workers", "0"), ["--workers"]),
        (("--vary", RATES, "--plot", "out.svg"), ["--plot", ".png"]),
    ],
)
def test_cli_bad_options(args, words):
    r = invoke(EXAMPLE, *args)
    assert r.exit_code == 2
    line = err_line(r)
    assert all(w in line for w in words), line


@pytest.mark.integration
@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
def test_run_all_keeps_item_order(executor):
    assert run_all(_square, list(range(7)), executor, workers=3) == [x * x for x in range(7)]


# ------------------------------------------------------------------------------ sweeps
@pytest.fixture(scope="module")
def serial_json() -> str:
    return _ok(invoke(EXAMPLE, "--vary", RATES, "--executor", "serial", "-f", "json"))


@pytest.mark.integration
def test_rate_sweep_cost_monotone_and_pareto_flags(serial_json):
    res = json.loads(serial_json)
    assert res["scenario"] == "deepseek-v4-pro-agentic-64k" and res["verify"] is False
    assert res["vary"][0]["key"] == "workload.rate_rps" and res["vary"][0]["values"] == [20, 40, 60]
    pts = res["points"]
    assert [p["index"] for p in pts] == [0, 1, 2]
    assert [p["values"]["workload.rate_rps"] for p in pts] == [20, 40, 60]
    for a in res["architectures"]:
        rows = [p["architectures"][a] for p in pts]
        assert all(r["status"] == "ok" for r in rows), a
        costs = [r["cost_per_hour"] for r in rows]
        assert costs == sorted(costs), (a, costs)  # more load never costs less
        assert [r["goodput_rps"] for r in rows] == [20.0, 40.0, 60.0]
        for r in rows:
            assert r["bcr"] == pytest.approx(r["goodput_rps"] * 3600 / r["cost_per_hour"], 1e-3)
            assert r["ttft_p90_s"] <= r["ttft_p99_s"]
            # each share is printed to 4 decimals: three of them sum to 1 within 1.5e-4
            shares = sum(r[f"route_{k}"] for k in ("p_md", "p_rld_md", "p_rld"))
            assert shares == pytest.approx(1, abs=1.5e-4)
        # the flags agree with the frontier list, which agrees with pareto_indices
        assert res["pareto"][a] == [p["index"] for p in pts if p["architectures"][a]["pareto"]]
        ref = pareto_indices([(r["goodput_rps"], r["cost_per_hour"], r["bcr"]) for r in rows])
        assert res["pareto"][a] == ref
    assert "seconds" not in serial_json  # no solver timings: reruns are byte-identical


@pytest.mark.integration
def test_process_pool_and_threads_match_serial(serial_json):
    proc = _ok(
        invoke(EXAMPLE, "--vary", RATES, "--executor", "process", "--workers", "2", "-f", "json")
    )
    assert proc == serial_json
    thr = _ok(
        invoke(EXAMPLE, "--vary", RATES, "--executor", "thread", "--workers", "3", "-f", "json")
    )
    assert thr == serial_json


@pytest.mark.integration
def test_csv_table_and_plot(tmp_path, serial_json):
    png = tmp_path / "sweep.png"
    csv1 = _ok(
        invoke(EXAMPLE, "--vary", RATES, "--executor", "serial", "-f", "csv", "--plot", str(png))
    )
    lines = csv1.splitlines()
    assert lines[0] == (
        "point,workload.rate_rps,architecture,status,cost_per_hour,goodput_rps,bcr,ttft_p90_s,"
        "ttft_p99_s,tpot_p90_ms,route_p_md,route_p_rld_md,route_p_rld,gpus,line,pareto,reason"
    )
    assert len(lines) == 1 + 3 * 3
    assert lines[1].startswith("0,20,pdd,ok,")
    res = json.loads(serial_json)
    first = res["points"][0]["architectures"]["pdd"]
    assert f",{first['cost_per_hour']}," in lines[1] and f",{first['gpus']}," in lines[1]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = _ok(invoke(EXAMPLE, "--vary", RATES, "--executor", "serial"))
    assert "Pareto" in table and "idc_pd" in table
    assert f"{first['cost_per_hour']:,.2f}" in table


@pytest.mark.integration
def test_infeasible_point_is_a_row_not_a_failure():
    # a 5 ms TPOT is below every decode step: no architecture can plan; 65 ms is fine (perf
    # v3's DeepSeek-V4-Pro decode steps are ~40 ms at small batch, so v2's 35 ms no longer is)
    r = invoke(EXAMPLE, "--vary", "sla.tpot_ms=5:65:60", "--executor", "serial", "-f", "json")
    res = json.loads(_ok(r))
    p0, p1 = res["points"]
    for a in res["architectures"]:
        row = p0["architectures"][a]
        assert row["status"] == "infeasible" and row["cost_per_hour"] is None
        assert row["reason"] and not row["reason"].startswith(f"{a}:") and not row["pareto"]
        assert p1["architectures"][a]["status"] == "ok"
        assert res["pareto"][a] == [1]
    assert "TPOT" in p0["architectures"]["idc_pd"]["reason"]


@pytest.mark.integration
def test_two_keys_give_the_cartesian_product():
    r = invoke(
        EXAMPLE,
        "--vary",
        "workload.rate_rps=20:40:20",
        "--vary",
        "prices.h200=3.1:4.1:1",
        "--executor",
        "serial",
        "-f",
        "json",
    )
    res = json.loads(_ok(r))
    vals = [tuple(p["values"].values()) for p in res["points"]]
    assert vals == [(20, 3.1), (20, 4.1), (40, 3.1), (40, 4.1)]
    for a in ("pdd", "cdc_pd"):  # main decode runs on H200: a dearer H200 never costs less
        c = [p["architectures"][a]["cost_per_hour"] for p in res["points"]]
        assert c[1] >= c[0] and c[3] >= c[2]
    # idc_pd has no H200; its cost ignores the H200 price
    c = [p["architectures"]["idc_pd"]["cost_per_hour"] for p in res["points"]]
    assert c[0] == c[1] and c[2] == c[3]


@pytest.mark.integration
def test_dask_executor_matches_serial(serial_json):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        addr = cluster.scheduler_address
        assert addr.startswith("tcp://")
        r = invoke(
            EXAMPLE, "--vary", RATES, "--executor", "dask://" + addr[len("tcp://") :], "-f", "json"
        )
        assert _ok(r) == serial_json
