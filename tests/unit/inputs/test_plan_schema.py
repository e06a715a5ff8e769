"""The plan file's schema: the golden plan validates strictly and round-trips byte for byte,
v1 plans upgrade, and hand edits get one-line errors naming the field (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdd_plan.cli.main import app
from pdd_plan.outputs.plan import Plan, parse_plan

pytestmark = pytest.mark.unit

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "pdd-paper.optimize.yaml"


def _data() -> dict:
    return yaml.safe_load(GOLDEN.read_text(encoding="utf-8"))


def test_golden_plan_is_a_strict_plan_and_round_trips():
    text = GOLDEN.read_text(encoding="utf-8")
    plan = parse_plan(yaml.safe_load(text))
    assert isinstance(plan, Plan) and plan.schema_version == 2
    assert plan.to_text("yaml") == text


def test_v1_plan_upgrades():
    d = _data()
    del d["schema_version"]
    d["plans"]["pdd"]["solver"]["seconds"] = 0.08  # v1 always had it
    d["infeasible"] = {"cdc_pd": "cdc_pd: no plan meets the scenario: TPOT 5 ms is below ..."}
    plan = parse_plan(d)
    why = plan.infeasible["cdc_pd"]
    assert why.reasons[0].kind == "tpot" and why.message.startswith("TPOT 5 ms")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["plans"]["pdd"]["instances"][0].update(count=10**9), "instances[0].count"),
        (lambda d: d["plans"]["pdd"]["instances"][0].update(count=-1), "instances[0].count"),
        (lambda d: d["plans"]["pdd"].update(ttft_s="fast"), "plans.pdd.ttft_s"),
        (lambda d: d["plans"]["pdd"]["line"].update(sku=5), "plans.pdd.line.sku"),
        (lambda d: d["plans"]["pdd"]["instances"][0].pop("datacenter"), "datacenter"),
        (lambda d: d["plans"]["pdd"]["instances"][1].update(datacenter="dc-z"), "dc-z"),
        (lambda d: d.update(schema_version=3), "schema_version 3"),
        (lambda d: d["plans"]["pdd"].update(speed=1), "unknown key"),
        (lambda d: d.update(plans={"nope": d["plans"]["pdd"]}), "unknown architecture 'nope'"),
    ],
)
def test_hand_edited_plans_get_one_line_errors(edit, needle, tmp_path):
    d = _data()
    edit(d)
    f = tmp_path / "plan.yaml"
    f.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    r = CliRunner().invoke(app, ["report", str(f)])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0] and str(f) in lines[0], r.output
    assert "Traceback" not in r.output
