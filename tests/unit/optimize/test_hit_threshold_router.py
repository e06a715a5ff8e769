"""`policy.router: hit_threshold`, the PDD report's rule: every class at or below the threshold
relays (short ones finishing near), every other goes P -> MD, in the planner's path tables and
in the simulator's routing alike; the threshold is read, never chosen by the solver."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from pdd_plan.architectures import P_MD, P_RLD, P_RLD_MD
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.routing import HitThreshold
from pdd_plan.inputs.schema.scenario import Policy, Scenario
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.optimize.tables import _hit_threshold_paths
from pdd_plan.sim.replay import planned_route
from pdd_plan.workload.classes import build_classes

TINY = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios" / "tiny.yaml"


@pytest.mark.unit
def test_one_path_per_class_by_hand():
    pol = Policy(router="hit_threshold", relay_hit_threshold=HitThreshold(at_or_below=0.9))
    hit = np.array([0.1, 0.5, 0.9, 0.95, 0.99])
    singular = np.array([True, False, True, True, False])
    got = _hit_threshold_paths(pol, hit, singular, (P_RLD_MD, P_RLD))
    assert got[P_MD].tolist() == [False, False, False, True, True]
    assert got[P_RLD_MD].tolist() == [False, True, False, False, False]
    assert got[P_RLD].tolist() == [True, False, True, False, False]
    # every class on exactly one path (the forced-routing verdict needs it)
    assert (np.vstack(list(got.values())).sum(axis=0) == 1).all()
    # without p_rld in the architecture, singular low-hit classes hand off like the rest
    got = _hit_threshold_paths(pol, hit, singular, (P_RLD_MD,))
    assert set(got) == {P_MD, P_RLD_MD}
    assert got[P_RLD_MD].tolist() == [True, True, True, False, False]


@pytest.mark.unit
def test_threshold_is_an_input_with_a_source():
    t = HitThreshold()
    assert t.at_or_below == 0.95 and "pdd-facts.md" in t.source
    with pytest.raises(ValueError):
        HitThreshold(at_or_below=1.5)
    # the default policy does not write the new fields (plans written before stay byte-equal)
    assert "relay_hit_threshold" not in Policy().model_dump()
    assert "handoff_payload" not in Policy().model_dump()


@pytest.mark.unit
def test_simulator_routes_the_same_requests():
    hit = np.array([0.2, 0.94, 0.95, 0.96, 1.0])
    out = np.array([100, 900, 400, 100, 50])
    r = planned_route(hit, out, 0.95, 500)
    assert r.tolist() == [2, 1, 2, 0, 0]  # p_rld, p_rld_md, p_rld, p_md, p_md


@pytest.mark.integration
def test_planner_relays_exactly_the_low_hit_share():
    d = yaml.safe_load(TINY.read_text())
    shares = {}
    for router in ("plan", "hit_threshold"):
        d["policy"] = {"router": router}
        ctx = build_context(Scenario.model_validate(d), "")
        cls = build_classes(ctx.class_spec)
        rate = float(d["workload"]["rate_rps"])
        p = plan_architecture(problem_of(ctx), "pdd", cls, rate, Caps())
        f = p.solution.flows
        shares[router] = {k: float(v.sum()) / rate for k, v in f.items()}
        if router == "hit_threshold":
            low = float(cls.weight[cls.hit_p <= 0.95].sum())
            relayed = shares[router].get(P_RLD_MD, 0.0) + shares[router].get(P_RLD, 0.0)
            assert relayed == pytest.approx(low, abs=1e-6)
            assert shares[router][P_MD] == pytest.approx(1.0 - low, abs=1e-6)
