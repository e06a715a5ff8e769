"""Operating points planned at several rates: lower rates get their own tables and never cost
more; one rate is the fixed-rate plan (unit side: tests/unit/optimize/test_points.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.architectures import get
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.profiles import example_path
from pdd_plan.optimize import milp, problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search import at_rates, fixed_rate
from pdd_plan.optimize.search.enumeration import Shared
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def default_pdd():
    path = str(example_path("pdd-paper"))
    ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    p = fixed_rate.plan(problem_of(ctx), get("pdd"), cls, 40.0, caps)
    return Shared.of(problem_of(ctx), get("pdd"), cls, caps), p


@pytest.mark.integration
def test_one_rate_is_the_fixed_rate_plan(default_pdd):
    sh, p = default_pdd
    t = p.tables
    pts = at_rates.rate_points(sh, t.meta["combo"], t.lines, [40.0], [1.0])
    sol = milp.solve_points(pts)
    assert sol.cost_per_hour == p.cost_per_hour and sol.counts == p.solution.counts
    assert sol.line_index == p.solution.line_index


@pytest.mark.integration
def test_lower_rates_get_their_own_tables_and_never_raise_the_cost(default_pdd):
    sh, p = default_pdd
    t = p.tables
    pts = at_rates.rate_points(sh, t.meta["combo"], t.lines, [16.0, 40.0, 16.0, 28.0], [6.0] * 4)
    # the peak shares the nominal tables; equal rates share one rebuilt set
    assert pts.paths[1] is None and pts.paths[0] is pts.paths[2] and pts.paths[3] is not None
    # a lower rate: a shorter prefill wait and a lighter line, so no class misses more often
    # (to 1e-9: the tail model's far end is not monotone at 1e-12, which no row can see)
    for o in range(len(t.lines)):
        for q in (0.9, 0.99):
            low, peak = pts.paths[0][o].miss[q]["p_md"], t.paths[o].miss[q]["p_md"]
            assert np.all(low <= peak + 1e-9)
        assert pts.line_level[0, o] < pts.line_level[1, o] or t.lines[o].config is None
    sol = milp.solve_points(pts)
    # tolerance: relative 1e-7, HiGHS's default primal feasibility tolerance: the two solves'
    # line costs part in the 6th decimal (the default at the band's median speed, no relay:
    # 347.6191716 against 347.6191781 $/h, the prefill and decode parts equal)
    assert sol.cost_per_hour >= p.cost_per_hour * (1 - 1e-7)
    assert [pt.rate_rps for pt in sol.points] == [16.0, 40.0, 16.0, 28.0]
