"""`pdd-plan sweep`: --vary parsing, the Pareto frontier, monotone cost in rate, infeasible rows,
and the same output from serial, process-pool, thread and Dask runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_plan.cli.sweep_grid import check_grid, parse_vary
from pdd_plan.common.errors import InfeasibleError, InputError
from pdd_plan.outputs.plan import Infeasible, Reason, load_plan
from pdd_plan.sweep.executors import run_all
from pdd_plan.sweep.pareto import pareto_indices
from pdd_plan.sweep.points import grid, set_key
from pdd_plan.sweep.rows import infeasible_rows, point_rows

ROOT = Path(__file__).resolve().parents[3]


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
