"""The free-rate search's bounds lose nothing: at every Dinkelbach step, the search (best
bound first, bounds carried across steps, tables reused) reaches the optimum of solving every
combination it enumerates, and equals a fresh search at the same lambda."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdd_plan import architectures
from pdd_plan.optimize import model
from pdd_plan.optimize.free_rate import FreeRateSearch, buckets
from pdd_plan.optimize.planner import Caps
from pdd_plan.resolve import resolve
from pdd_plan.schema.scenario import Scenario
from pdd_plan.workload.classes import build_classes

TINY = Path(__file__).resolve().parents[1] / "benchmarks" / "scenarios" / "tiny.yaml"


def _every(search: FreeRateSearch, objective: str, lam: float) -> float:
    sols = [model.solve(search._tables_of(i), objective, lam) for i in range(len(search.combos))]
    return max(s.objective for s in sols if s is not None)


def test_buckets_cover_every_pool_size_once():
    for n in range(1, 40):
        sizes = [k for lo, hi in buckets(n) for k in range(lo, hi + 1)]
        assert sizes == list(range(1, n + 1))


@pytest.mark.parametrize("architecture", ["pdd", "idc_pd"])
def test_dinkelbach_steps_match_every_combination(architecture):
    ctx = resolve(Scenario.model_validate(yaml.safe_load(TINY.read_text())), "")
    cls = build_classes(ctx)
    spec = architectures.get(architecture)
    search = FreeRateSearch(ctx, spec, cls, Caps())
    p = search.solve("goodput")
    assert p.solution.objective == pytest.approx(_every(search, "goodput", 0.0), abs=1e-7)
    lam = p.rate / p.cost_per_hour
    for _ in range(4):
        q = search.solve("dinkelbach", lam)
        assert q.solution.objective == pytest.approx(_every(search, "dinkelbach", lam), abs=1e-7)
        fresh = FreeRateSearch(ctx, spec, cls, Caps()).solve("dinkelbach", lam)
        assert q.solution.objective == pytest.approx(fresh.solution.objective, abs=1e-7)
        if q.solution.objective <= 1e-9:
            break
        lam = q.rate / q.cost_per_hour
