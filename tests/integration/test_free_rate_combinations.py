"""The free-rate (Dinkelbach) search against every combination it could pick, planned on a
scenario (its steps by hand: tests/unit/optimize/test_free_rate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdd_plan import architectures
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import milp, problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.free_rate import FreeRateSearch
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.integration


TINY = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios" / "tiny.yaml"


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
