"""The free-rate search's bounds lose nothing: at every Dinkelbach step, the search (best
bound first, bounds carried across steps, tables reused) reaches the optimum of solving every
combination it enumerates, and equals a fresh search at the same lambda."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdd_plan import architectures
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search import fixed_rate
from pdd_plan.optimize.search.free_rate import FreeRateSearch, buckets, cap_levels
from pdd_plan.optimize.search.objectives import dinkelbach
from pdd_plan.workload.classes import build_classes

TINY = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios" / "tiny.yaml"


@pytest.mark.unit
def test_buckets_cover_every_pool_size_once():
    for n in range(1, 40):
        sizes = [k for lo, hi in buckets(n) for k in range(lo, hi + 1)]
        assert sizes == list(range(1, n + 1))


@pytest.mark.unit
def test_cap_levels_clip_to_the_cap():
    assert cap_levels([0.5, 0.65, 0.8, 0.9], 0.95) == [0.5, 0.65, 0.8, 0.9]
    assert cap_levels([0.5, 0.65, 0.8, 0.9], 0.7) == [0.5, 0.65, 0.7]
    # a cap tightened (by verification) below every level leaves the cap, not an empty search
    assert cap_levels([0.5, 0.65], 0.3) == [0.3]


@pytest.mark.unit
def test_prefill_pools_run_up_to_their_cap():
    """The fixed-rate search runs a prefill pool at any utilization up to caps.prefill: the
    free-rate search must reach it too, or its optimum pays for an instance the other saves."""
    ctx = build_context(Scenario.model_validate(yaml.safe_load(TINY.read_text())), "")
    caps = Caps(prefill=0.93)
    search = FreeRateSearch(
        problem_of(ctx), architectures.get("idc_pd"), build_classes(ctx.class_spec), caps
    )
    levels = sorted({cb.rho for cb in search.combos})
    assert levels[-1] == 0.93
    assert set(ctx.scenario.search.utilization_levels) < set(levels)


@pytest.mark.unit
def test_dinkelbach_never_loses_to_the_fixed_rate_plan_at_its_rate():
    """With one coarse utilization level the free-rate space is a conservative subset of the
    fixed-rate one (its pools' waits at a level, not at their exact utilization): before the
    fixed-rate re-solve, IDC-PD's answer cost $22.5/h where the fixed-rate plan at the same rate
    costs $17.5/h. The answer must be the cheaper one."""
    d = yaml.safe_load(TINY.read_text())
    d["workload"].pop("rate_rps", None)
    d.setdefault("search", {})["utilization_levels"] = [0.5]
    ctx = build_context(Scenario.model_validate(d), "")
    cls = build_classes(ctx.class_spec)
    p = dinkelbach(problem_of(ctx), "idc_pd", cls, Caps())
    fixed = fixed_rate.plan(problem_of(ctx), architectures.get("idc_pd"), cls, p.rate, Caps())
    assert p.cost_per_hour <= fixed.cost_per_hour * (1 + 1e-9)
    assert p.optimality_gap <= 1e-6
