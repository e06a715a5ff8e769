"""The summary of a solved architecture is the typed plan (its figures by hand:
tests/unit/optimize/test_summary.py)."""

from __future__ import annotations

import pytest

from pdd_plan.outputs.plan import ArchitecturePlan
from tests.unit.optimize import test_summary

pytestmark = pytest.mark.integration
solved = test_summary.solved  # the unit tests' fixture


@pytest.mark.integration
def test_summarize_returns_the_typed_plan(solved):
    raw, plan = solved
    assert isinstance(plan, ArchitecturePlan)
    # the plan is valid as built: a dump read back is the same plan
    assert ArchitecturePlan.model_validate(plan.model_dump()) == plan
