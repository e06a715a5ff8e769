"""The summary builds the typed plan directly, one function per metric: its figures against
independent arithmetic on the solution they measure, and no dict round trip or bag left."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from pdd_plan.architectures import PATHS
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.schema.uncertainty import Uncertainty
from pdd_plan.optimize import problem_of, summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.objectives import solve_architecture
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.outputs.plan import ArchitecturePlan
from pdd_plan.workload.classes import build_classes

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def solved() -> tuple[SolverResult, ArchitecturePlan]:
    # the default at the perf model's own speed (a stated speed band centred on it)
    path = ROOT / "examples" / "pdd-paper.yaml"
    one = {"dist": "lognormal", "median": 1.0, "sigma": 0.1, "source": "test"}
    unc = Uncertainty.model_validate({"inputs": {"prefill_speed": one, "decode_speed": one}})
    ctx = build_context(load_scenario(path).model_copy(update={"uncertainty": unc}), str(path))
    assert ctx.speed == 1.0
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(problem_of(ctx), "pdd", cls, ctx.scenario.workload.rate_rps, caps)
    return raw, summary.summarize(raw, cls, raw.rate, ctx.prefill_dc)


@pytest.mark.unit
def test_route_shares_are_the_solution_flows_over_the_rate(solved):
    # the flows as the plan is served: the router's rule (whole hit bins relay, routed.py) where
    # the plan relays, else the MILP's (the default's PDD plan, at seven prefill instances, does
    # not relay; the router's rule has its own tests)
    raw, plan = solved
    for p in PATHS:
        flow = float(np.sum(raw.flows[p])) if p in raw.flows else 0.0
        # tolerance: the plan rounds route shares to 4 decimals (3 paths: 1e-3 for their sum)
        assert getattr(plan.route_share, p) == pytest.approx(flow / raw.rate, abs=1e-4)
    assert sum(getattr(plan.route_share, p) for p in PATHS) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.unit
def test_costs_add_up_and_bcr_is_requests_per_dollar(solved):
    raw, plan = solved
    # no `owned:` section: every group and the line at market price make the total
    line = plan.line.cost_per_hour if plan.line else 0.0
    total = sum(g.cost_per_hour for g in plan.instances) + line
    assert plan.cost_per_hour == pytest.approx(total, abs=0.01 * (len(plan.instances) + 1))
    # tolerance: the plan rounds BCR and utilization to 4 decimals
    assert plan.bcr == pytest.approx(raw.rate * 3600 / raw.cost_per_hour, rel=1e-4)
    assert plan.instances[0].role == "prefill" and plan.instances[0].count == raw.prefill_count
    assert plan.prefill_utilization == pytest.approx(raw.pool.rho, abs=1e-4)


@pytest.mark.unit
def test_no_bag_and_no_dict_round_trip():
    assert "extra" not in {f.name for f in dataclasses.fields(SolverResult)}
    text = (ROOT / "pdd_plan" / "optimize" / "summary.py").read_text(encoding="utf-8")
    assert not re.search(r"model_validate\(", text)
    assert not re.search(
        r"\.extra\b", "".join(p.read_text() for p in (ROOT / "pdd_plan").rglob("*.py"))
    )
