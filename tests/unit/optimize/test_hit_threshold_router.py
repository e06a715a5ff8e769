"""`policy.router: hit_threshold`, the PDD report's rule: every class at or below the threshold
relays (short ones finishing near), every other goes P -> MD, in the planner's path tables and
in the simulator's routing alike; the threshold is read, never chosen by the solver."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.architectures import P_MD, P_RLD, P_RLD_MD
from pdd_plan.inputs.schema.routing import HitThreshold
from pdd_plan.inputs.schema.scenario import Policy
from pdd_plan.optimize.tables import _hit_threshold_paths
from pdd_plan.sim.replay import planned_route


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
