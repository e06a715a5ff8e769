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
from pdd_plan.optimize import milp, problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search import fixed_rate
from pdd_plan.optimize.search.free_rate import FreeRateSearch, buckets, cap_levels
from pdd_plan.optimize.search.objectives import dinkelbach
from pdd_plan.workload.classes import build_classes

TINY = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios" / "tiny.yaml"


def _every(search: FreeRateSearch, objective: str, lam: float) -> float:
    sols = [milp.solve(search._tables_of(i), objective, lam) for i in range(len(search.combos))]
    return max(s.objective for s in sols if s is not None)


def _memo_solves(monkeypatch) -> None:
    """milp.solve answers the same tables, objective and lambda with the same solution (HiGHS
    is deterministic): the combinations the search itself solved are not solved again by
    `_every` (a third of its MILPs). Keyed by the tables object, kept alive here so its id is
    never reused; a fresh search builds its own tables and so solves its own MILPs."""
    real, seen = milp.solve, {}

    def solve(t, objective="cost", lam=0.0, *args, **kw):
        # the time limit is left out: no MILP here comes near it (each well under a second)
        key = (id(t), objective, lam, kw.get("duals", False))
        if key not in seen:
            seen[key] = (t, real(t, objective, lam, *args, **kw))
        return seen[key][1]

    monkeypatch.setattr(milp, "solve", solve)


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


@pytest.mark.integration
@pytest.mark.parametrize("architecture", ["pdd", "idc_pd"])
def test_dinkelbach_steps_match_every_combination(architecture, monkeypatch):
    _memo_solves(monkeypatch)
    # no singular cap: classes are not split by output length, half the MILP (this checks the
    # search's bounds, which do not depend on the classes' shape)
    d = yaml.safe_load(TINY.read_text())
    d.setdefault("policy", {})["singular_max_output_tokens"] = None
    # one line SKU (eth-25g, the one PDD's optimum leases; up to 2 lines): each MILP has half
    # the line options, the combinations the search enumerates and bounds are the same 45, and
    # the optimum is unchanged (goodput 25.4 req/s, 20 of them relayed, two Dinkelbach steps)
    d["link"]["candidates"] = ["eth-25g"]
    ctx = build_context(Scenario.model_validate(d), "")
    cls = build_classes(ctx.class_spec)
    spec = architectures.get(architecture)
    search = FreeRateSearch(problem_of(ctx), spec, cls, Caps())
    p = search.solve("goodput")
    assert p.solution.objective == pytest.approx(_every(search, "goodput", 0.0), abs=1e-7)
    lam = p.rate / p.cost_per_hour
    for _ in range(4):
        q = search.solve("dinkelbach", lam)
        assert q.solution.objective == pytest.approx(_every(search, "dinkelbach", lam), abs=1e-7)
        fresh = FreeRateSearch(problem_of(ctx), spec, cls, Caps()).solve("dinkelbach", lam)
        assert q.solution.objective == pytest.approx(fresh.solution.objective, abs=1e-7)
        if q.solution.objective <= 1e-9:
            break
        lam = q.rate / q.cost_per_hour


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
