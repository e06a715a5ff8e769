"""`milp.forced`: the one-point model's feasibility without the solver, where the routing has no
choice. Checked against HiGHS itself on the default's planned fleets without relay decode (every
probe forced) at rates across each fleet's goodput edge, and by hand on small tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs.context import build_context
from pdd_plan.optimize import milp, problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.milp import forced
from pdd_plan.outputs.plan import load_plan
from pdd_plan.workload.classes import build_classes

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"


@pytest.fixture(scope="module")
def fleets():
    p = load_plan(PLAN)
    ctx = build_context(p.inputs, str(PLAN))
    pb, classes = problem_of(ctx), build_classes(ctx.class_spec)
    specs = fleet.from_plan(ctx, p, str(PLAN))
    # the fleets without relay decode (a relay fleet's routing is a choice: not forced)
    plain = {a for a, ap in p.plans.items() if all(g.role != "relay_decode" for g in ap.instances)}
    assert len(plain) >= 2
    return {
        a: analytic.fleet_model(pb, fs, classes, Caps(decode=1.0))
        for a, fs in specs.items()
        if a in plain
    }


def _spy(monkeypatch) -> list[tuple[float, bool | None, bool]]:
    """Every verdict at_rate asks for, beside the solver's on the same tables."""
    seen = []
    real = forced.verdict

    def both(t):
        v = real(t)
        seen.append((t.rate_rps, v, milp.solve(t, "cost") is not None))
        return v

    monkeypatch.setattr(forced, "verdict", both)
    return seen


@pytest.mark.integration
def test_forced_verdicts_match_the_solver_across_each_goodput_edge(fleets, monkeypatch):
    seen = _spy(monkeypatch)
    for fm in fleets.values():
        lo, hi = analytic.search(fm)
        assert lo.ok and not hi.ok
        # both sides of the edge, close in and further out (each side's verdict is known)
        for r in lo.rate * np.array([0.5, 0.9, 0.999, 1.0]):
            assert analytic.at_rate(fm, float(r)).ok
        for r in hi.rate * np.array([1.0, 1.001, 1.1]):
            assert not analytic.at_rate(fm, float(r)).ok
    asked = [s for s in seen if s[1] is not None]
    assert len(asked) >= len(fleets) * 7  # no fleet here has relay decode: all forced
    assert all(v == solver for _, v, solver in asked), [s for s in asked if s[1] != s[2]]


@pytest.mark.integration
def test_a_forced_plan_is_the_solvers_routing(fleets):
    """The verdict spares the MILP, not the plan: the plan at the goodput is the solver's."""
    for fm in fleets.values():
        lo, _ = analytic.search(fm)
        plan = lo.plan
        # tolerance: rel 1e-5: the plan is built at the search's rate and prints it to 6
        # significant digits (optimize/summary.py: half a unit of the 6th is 5e-6)
        assert plan is not None and plan.goodput_rps == pytest.approx(lo.rate, rel=1e-5)
        assert sum(plan.route_share.model_dump().values()) == pytest.approx(1.0, abs=1e-6)
        assert plan.solver.milps == 1  # solved once, for the plan


def _tables(fm, rate: float):
    """The tables at_rate hands the solver at `rate` (captured from its call)."""
    got = []
    real = forced.verdict

    def keep(t):
        got.append(t)
        return real(t)

    forced.verdict = keep
    try:
        analytic.at_rate(fm, rate)
    finally:
        forced.verdict = real
    return got[0] if got else None


@pytest.mark.integration
def test_unforced_tables_go_to_the_solver(fleets):
    fm = next(iter(fleets.values()))
    lo, _ = analytic.search(fm)
    t = _tables(fm, lo.rate)
    assert t is not None and forced.verdict(t) is True
    assert forced.verdict(dataclasses.replace(t, rate_rps=None)) is None  # the rate free
    assert forced.verdict(dataclasses.replace(t, lines=t.lines * 2, paths=t.paths * 2)) is None
    assert forced.verdict(dataclasses.replace(t, budget_per_hour=1.0)) is None
    two = [dataclasses.replace(t.md[0], key="twin"), *t.md]  # two candidates, one GPU row
    assert forced.verdict(dataclasses.replace(t, md=two)) is None


@pytest.mark.integration
def test_fewer_gpus_than_the_load_needs_is_infeasible_by_hand(fleets):
    """Hand arithmetic on the decode row: with the fleet's GPUs cut to one instance fewer than
    its throughput needs, the verdict is no, and with them restored, yes."""
    fm = next(iter(fleets.values()))
    lo, _ = analytic.search(fm)
    t = _tables(fm, lo.rate * 0.5)
    c = t.md[0]
    pt = t.paths[0]
    path = {p for p, ok in pt.allowed.items() if ok.any()}
    (p,) = path
    tokens = float(np.dot(t.weight, pt.md_tokens[p])) * t.rate_rps  # tokens/s the rate asks
    need = int(np.ceil(tokens / (t.decode_cap * c.tokens_per_s)))  # instances it takes
    site = (c.datacenter, c.gpu)
    enough = dataclasses.replace(t, gpus_left={site: need * c.gpus})
    short = dataclasses.replace(t, gpus_left={site: (need - 1) * c.gpus})
    assert forced.verdict(enough) is (milp.solve(enough, "cost") is not None)
    assert forced.verdict(short) is False and milp.solve(short, "cost") is None
