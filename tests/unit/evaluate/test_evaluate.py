"""`pdd-plan evaluate`: SLA goodput of an existing fleet. A verified plan serves at least its
rate; shrinking a fleet never raises its goodput; analytic and simulated goodput agree; fleets
too small are infeasible with a reason; bad fleet files are one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdd_plan.evaluate import Options, evaluate, fleet
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema import Scenario
from pdd_plan.inputs.schema import fleet as fleet_schema
from pdd_plan.outputs import plan as plan_schema
from tests.cli_helpers import err_line, invoke

ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "pdd_plan" / "data" / "examples" / "pdd-paper-fleet.yaml"
ANALYTIC = Options(simulate=False)


def _scenario(data: dict, path: Path = FLEET) -> tuple:
    ctx = build_context(Scenario.model_validate(data), str(path))
    return fleet.from_scenario(ctx)


def _fleet_data() -> dict:
    return yaml.safe_load(FLEET.read_text())


@pytest.mark.unit
def test_fleet_without_decode_is_infeasible_with_a_reason():
    d = _fleet_data()
    d["fleet"]["idc_pd"]["instances"][1]["count"] = 0
    ctx, fl = _scenario(d)
    out = evaluate(ctx, fl, ANALYTIC).as_dict()
    r = out["infeasible"]["idc_pd"]["reasons"][0]
    assert r["kind"] == "missing_role" and "decode" in r["message"]
    assert "pdd" in out["architectures"]


@pytest.mark.unit
def test_fleet_that_meets_no_rate_says_why():
    d = _fleet_data()
    d["sla"]["ttft_p90_s"], d["sla"]["ttft_p99_s"] = 0.05, 0.05  # below any 64K prefill
    ctx, fl = _scenario(d)
    out = evaluate(ctx, fl, ANALYTIC).as_dict()
    assert not out["architectures"]
    for a, inf in out["infeasible"].items():
        r = inf["reasons"][0]
        assert r["kind"] == "ttft" and r["field"] == "sla.ttft_p90_s", (a, r)
    d = _fleet_data()
    d["sla"]["tpot_ms"] = 0.5  # no decode step is that fast
    ctx, fl = _scenario(d)
    out = evaluate(ctx, fl, ANALYTIC).as_dict()
    assert {i["reasons"][0]["kind"] for i in out["infeasible"].values()} == {"tpot"}


@pytest.mark.unit
def test_bounds_match_the_plan_schema():
    assert fleet_schema.MAX_INSTANCES_PER_GROUP == plan_schema.MAX_INSTANCES_PER_GROUP
    assert fleet_schema.MAX_GPUS_PER_INSTANCE == plan_schema.MAX_GPUS_PER_INSTANCE


def _edit(tmp_path: Path, edit) -> Path:
    d = _fleet_data()
    edit(d)
    p = tmp_path / "fleet.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


def _grp(d: dict, i: int = 0, key: str = "all") -> dict:
    return d["fleet"][key]["instances"][i]


@pytest.mark.unit
@pytest.mark.parametrize(
    "edit, field, words",
    [
        (lambda d: _grp(d).update(role="decoder"), "fleet.all.instances[0].role", "prefill"),
        (
            lambda d: _grp(d).update(gpus_per_instance=1),
            "fleet.all.instances[0].gpus_per_instance",
            "does not fit",
        ),
        (lambda d: d["fleet"]["all"]["line"].update(sku="eth-999g"), "fleet.all.line.sku", "line"),
        (lambda d: _grp(d).update(datacenter="dc-z"), "fleet.all.instances[0].datacenter", "dc-z"),
        (lambda d: _grp(d).update(gpu="h200"), "fleet.all.instances[0].gpu", "h200"),
        (lambda d: _grp(d).update(count=10**9), "fleet.all.instances[0].count", "100000"),
        (lambda d: _grp(d).update(count=40), "fleet.all.instances[0]", "512"),
        (lambda d: d["fleet"].update(pdd2=d["fleet"]["all"]), "fleet", "pdd2"),
        (lambda d: d["fleet"]["all"].pop("line"), "fleet.all.line", "line"),
        (lambda d: d.pop("fleet"), "fleet", "no fleet"),
    ],
)
def test_bad_fleet_files_are_one_line_errors(tmp_path, edit, field, words):
    r = invoke("evaluate", str(_edit(tmp_path, edit)), "--no-simulate", "-f", "json")
    assert r.exit_code == 2
    line = err_line(r)
    assert f"field '{field}'" in line and words in line, line


@pytest.mark.unit
def test_cli_bad_flags():
    r = invoke("evaluate", str(FLEET), "--step", "2")
    assert r.exit_code == 2 and "--step" in err_line(r)
    r = invoke("evaluate", str(FLEET), "-n", "5")
    assert r.exit_code == 2 and "--requests" in err_line(r)
