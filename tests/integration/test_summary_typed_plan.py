"""The summary of a solved architecture is the typed plan (its figures by hand:
tests/unit/optimize/test_summary.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.schema.plan import ArchitecturePlan
from pdd_plan.optimize import problem_of, summary
from pdd_plan.optimize.search.caps import Caps
from pdd_plan.optimize.search.objectives import solve_architecture
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.integration


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def solved() -> tuple[SolverResult, ArchitecturePlan]:
    path = ROOT / "examples" / "pdd-paper.yaml"
    ctx = build_context(load_scenario(path), str(path))
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    raw = solve_architecture(problem_of(ctx), "pdd", cls, ctx.scenario.workload.rate_rps, caps)
    return raw, summary.summarize(raw, cls, raw.rate, ctx.prefill_dc)


@pytest.mark.integration
def test_summarize_returns_the_typed_plan(solved):
    raw, plan = solved
    assert isinstance(plan, ArchitecturePlan)
    # the plan is valid as built: a dump read back is the same plan
    assert ArchitecturePlan.model_validate(plan.model_dump()) == plan
