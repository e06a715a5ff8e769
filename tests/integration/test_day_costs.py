"""A day plan prices each instance once: the base fleet at the base price, the busiest
period's elastic instances at on-demand, in the fleet's groups as in the plan's $/hour."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def test_groups_and_line_sum_to_the_plans_cost():
    path = str(ROOT / "examples" / "a-day-narrow-line.yaml")
    sc = load_scenario(path)
    plan = optimize(build_context(sc, path), verify=False)
    assert any(sc.on_demand_prices[g] > sc.prices.get(g, 0) for g in sc.on_demand_prices)
    elastic = 0
    for a, p in plan.plans.items():
        line = p.line.cost_per_hour if p.line is not None else 0.0
        total = sum(g.cost_per_hour for g in p.instances) + line
        # tolerance: $0.011 a row: each printed cost is rounded to the cent
        assert total == pytest.approx(p.cost_per_hour, abs=0.011 * (len(p.instances) + 1)), a
        elastic += sum(max(g.per_period) - g.base for g in plan.day.architectures[a].groups)
    assert elastic > 0  # the busiest period runs elastic instances: the case that was wrong
