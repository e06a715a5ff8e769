"""`pdd-plan sweep`: --vary parsing, the Pareto frontier, monotone cost in rate, infeasible rows,
and the same output from serial, process-pool, thread and Dask runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pdd_plan.cli.main import app
from pdd_plan.cli.sweep_grid import check_grid, parse_vary
from pdd_plan.common.errors import InfeasibleError, InputError
from pdd_plan.inputs.schema.plan import Infeasible, Reason, load_plan
from pdd_plan.sweep.executors import run_all
from pdd_plan.sweep.pareto import pareto_indices
from pdd_plan.sweep.points import grid, set_key
from pdd_plan.sweep.rows import infeasible_rows, point_rows

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = str(ROOT / "examples" / "pdd-paper.yaml")
RATES = "workload.rate_rps=20:60:20"


def _runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def invoke(*args: str):
    return _runner().invoke(app, ["sweep", *args])


def _err_line(r) -> str:
    text = (r.stderr if hasattr(r, "stderr") else r.output).strip()
    assert "Traceback" not in text
    lines = text.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    return lines[0]


def _ok(r) -> str:
    assert r.exit_code == 0, (r.output, getattr(r, "stderr", ""))
    return r.stdout


# ------------------------------------------------------------------------------ --vary parsing
@pytest.mark.unit
@pytest.mark.parametrize(
    "spec, values",
    [
        ("workload.rate_rps=20:60:20", (20, 40, 60)),
        ("link.max_lines=1:4:1", (1, 2, 3, 4)),
        ("sla.ttft_p90_s=5:5:1", (5,)),
        ("x=0:0.9:0.3", (0.0, 0.3, 0.6, 0.9)),  # STOP on the grid despite 0.1 + 0.2 != 0.3
        ("x=0:1:0.3", (0.0, 0.3, 0.6, 0.9)),  # STOP off the grid: not included
        ("prices.h200=2.5:3.1:0.2", (2.5, 2.7, 2.9, 3.1)),
        ("x=1e-1:3e-1:1e-1", (0.1, 0.2, 0.3)),
    ],
)
def test_parse_vary_good(spec, values):
    v = parse_vary(spec)
    assert v.key == spec.split("=")[0]
    assert v.values == values
    assert all(type(a) is type(b) for a, b in zip(v.values, values))  # ints stay ints


@pytest.mark.unit
@pytest.mark.parametrize(
    "spec, words",
    [
        ("sla.ttft_p90_s=1:0:1", ["--vary sla.ttft_p90_s", "below START"]),
        ("sla.ttft_p90_s=a:b:c", ["--vary sla.ttft_p90_s", "not a finite number"]),
        ("sla.ttft_p90_s=1:2:0", ["--vary sla.ttft_p90_s", "STEP must be > 0"]),
        ("sla.ttft_p90_s=1:2", ["--vary sla.ttft_p90_s", "START:STOP:STEP"]),
        ("sla.ttft_p90_s", ["--vary", "KEY=START:STOP:STEP"]),
        ("sla..x=1:2:1", ["--vary sla..x", "dotted key path"]),
        ("x=0:1e9:1", ["--vary x", "over the limit", "PDD_PLAN_MAX_SWEEP_POINTS"]),
    ],
)
def test_parse_vary_bad(spec, words):
    with pytest.raises(InputError) as e:
        parse_vary(spec)
    assert all(w in str(e.value) for w in words), str(e.value)


@pytest.mark.unit
def test_grid_and_set_key():
    a, b = parse_vary("a=1:2:1"), parse_vary("b.c=0.5:1:0.5")
    assert grid([a, b]) == [(1, 0.5), (1, 1.0), (2, 0.5), (2, 1.0)]  # first --vary outermost
    with pytest.raises(InputError, match="--vary a.*more than once"):
        check_grid([a, a])
    with pytest.raises(ValueError):  # the domain refuses what the command line would have
        grid([a, a])
    assert check_grid([parse_vary("x=0:39:1"), parse_vary("y=0:49:1")]) == 2000  # the cap
    with pytest.raises(InputError, match=r"--vary x, y.*2,050 points.*limit of 2,000"):
        check_grid([parse_vary("x=0:40:1"), parse_vary("y=0:49:1")])
    data = {"sla": {"ttft_p90_s": 10}, "datacenters": [{"name": "a", "gpus": {"h100": 8}}]}
    out = set_key(data, "policy.drc", False)
    assert out["policy"] == {"drc": False} and "policy" not in data  # deep copy, dict created
    out = set_key(data, "datacenters.0.gpus.h100", 16)
    assert out["datacenters"][0]["gpus"]["h100"] == 16 and data["datacenters"][0]["gpus"] == {
        "h100": 8
    }
    with pytest.raises(InputError, match="is a list"):
        set_key(data, "datacenters.a.gpus", 1)
    with pytest.raises(InputError, match="no index 3"):
        set_key(data, "datacenters.3.name", "x")
    with pytest.raises(InputError, match="not a mapping"):
        set_key(data, "sla.ttft_p90_s.x", 1)


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
    line = _err_line(r)
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
    line = _err_line(r)
    assert all(w in line for w in words), line


# ------------------------------------------------------------------------------ Pareto
@pytest.mark.unit
def test_pareto_hand_made():
    # (goodput up, cost down, bcr up)
    pts = [
        (10.0, 100.0, 0.10),  # 0: on (cheapest)
        (20.0, 150.0, 0.13),  # 1: on (more goodput)
        (20.0, 160.0, 0.125),  # 2: off: 1 has the same goodput, cheaper, better bcr
        (30.0, 300.0, 0.10),  # 3: on: most goodput
        (15.0, 150.0, 0.10),  # 4: off: 1 is at least as good everywhere, better in two
        (20.0, 150.0, 0.13),  # 5: on: equal to 1, neither strictly better
        (5.0, 20.0, 0.25),  # 6: on: best bcr and cheapest
    ]
    assert pareto_indices(pts) == [0, 1, 3, 5, 6]
    assert pareto_indices([]) == []
    assert pareto_indices([(1.0, 1.0, 1.0)]) == [0]
    # one coordinate strictly better, the rest equal, is enough to dominate
    assert pareto_indices([(1.0, 2.0, 3.0), (1.0, 2.0, 3.1)]) == [1]
    assert pareto_indices([(1.0, 2.0, 3.0), (1.0, 1.9, 3.0)]) == [1]


# ------------------------------------------------------------------------------ rows
# a reason that itself reads like the old joined "a: why; b: why" message: rows must not split it
TRICKY = "line capacity: 2 Gbps over 1 x eth-1g; pdd: looks like another architecture"


def _infeasible(message: str) -> Infeasible:
    return Infeasible(
        reasons=[
            Reason(kind="line_capacity", message=message, field="link.max_lines"),
            Reason(kind="sla", message="a later reason, not the binding one"),
        ]
    )


@pytest.mark.unit
def test_rows_read_the_typed_plan():
    plan = load_plan(ROOT / "tests" / "golden" / "narrow-line.optimize.yaml")
    plan = plan.model_copy(
        update={
            "plans": {a: p for a, p in plan.plans.items() if a != "cdc_pd"},
            "infeasible": {"cdc_pd": _infeasible(TRICKY)},
        }
    )
    rows = point_rows(plan, ["pdd", "cdc_pd", "idc_pd"], verify=True)
    assert list(rows) == ["pdd", "cdc_pd", "idc_pd"]
    pdd = plan.plans["pdd"]
    assert rows["pdd"]["status"] == "ok" and rows["pdd"]["cost_per_hour"] == pdd.cost_per_hour
    assert rows["pdd"]["gpus"] == sum(g.count * g.gpus_per_instance for g in pdd.instances)
    assert rows["pdd"]["line"] == f"{pdd.line.count}x {pdd.line.sku}"
    assert rows["pdd"]["sim_sla_met"] == pdd.simulated.sla_met
    assert rows["idc_pd"]["line"] is None
    inf = rows["cdc_pd"]
    assert inf["status"] == "infeasible" and inf["cost_per_hour"] is None
    assert inf["reason"] == f"no plan meets the scenario: {TRICKY}"
    assert inf["sim_sla_met"] is None and inf["pareto"] is False


@pytest.mark.unit
def test_infeasible_point_rows_take_each_architectures_own_reason():
    by = {"pdd": _infeasible(TRICKY), "idc_pd": _infeasible("TPOT 5 ms is below ...")}
    e = InfeasibleError("pdd: joined; idc_pd: joined", by_architecture=by)
    rows = infeasible_rows(e, ["pdd", "idc_pd", "cdc_pd"], verify=False)
    assert rows["pdd"]["reason"] == f"no plan meets the scenario: {TRICKY}"
    assert rows["idc_pd"]["reason"] == "no plan meets the scenario: TPOT 5 ms is below ..."
    assert rows["cdc_pd"]["reason"] == "pdd: joined; idc_pd: joined"  # none of its own: all
    assert all(r["status"] == "infeasible" and "sim_sla_met" not in r for r in rows.values())


def _square(x: int) -> int:
    return x * x


@pytest.mark.integration
@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
def test_run_all_keeps_item_order(executor):
    assert run_all(_square, list(range(7)), executor, workers=3) == [x * x for x in range(7)]


@pytest.mark.unit
def test_run_all_serial_stops_after_a_stop_result():
    seen = []
    out = run_all(
        _square,
        [1, 2, 3, 4],
        "serial",
        progress=lambda d, n: seen.append((d, n)),
        stop=lambda r: r == 4,
    )
    assert out == [1, 4] and seen == [(1, 4), (2, 4)]


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
