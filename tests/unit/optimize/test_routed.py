"""The plan's shares as the replay's router routes them (pdd_plan/optimize/routed.py), by hand:
whole hit bins at or below the threshold relay, their singular classes end on relay decode."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.architectures import P_MD, P_RLD, P_RLD_MD
from pdd_plan.inputs.schema.scenario import Policy
from pdd_plan.optimize import routed
from pdd_plan.workload.requests import RequestClasses

pytestmark = pytest.mark.unit

W = np.array([0.1, 0.2, 0.3, 0.4])
CLS = RequestClasses(
    input_tokens=np.full(4, 1000.0),
    output_tokens=np.array([100.0, 900.0, 100.0, 900.0]),
    hit_p=np.array([0.1, 0.3, 0.5, 0.9]),
    hit_d=np.zeros(4),
    weight=W,
)
RATE = 10.0


def _milp() -> dict[str, np.ndarray]:
    """The MILP relays 30% of the hit-0.3 class (on p_rld_md) and sends the rest direct."""
    total = RATE * W
    rld_md = np.array([0.0, 0.3 * total[1], 0.0, 0.0])
    return {P_MD: total - rld_md, P_RLD_MD: rld_md, P_RLD: np.zeros(4)}


def test_the_router_relays_whole_bins_and_ends_singular_ones_on_relay():
    got = routed.router_flows(_milp(), CLS, RATE, Policy(), 500)
    assert got is not None
    # threshold 0.4 (the upper edge of the hit bin [0.2, 0.4)): hit 0.1 (100 tokens, singular)
    # ends on relay decode, hit 0.3 (900 tokens) relays whole, the rest go direct
    np.testing.assert_allclose(got[P_RLD], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(got[P_RLD_MD], [0.0, 2.0, 0.0, 0.0])
    np.testing.assert_allclose(got[P_MD], [0.0, 0.0, 3.0, 4.0])
    # every request is routed once
    np.testing.assert_allclose(sum(got.values()), RATE * W)
    assert routed.planned_threshold(_milp(), CLS, RATE) == pytest.approx(0.4)


def test_no_singular_cap_relays_every_relayed_class_to_main_decode():
    got = routed.router_flows(_milp(), CLS, RATE, Policy(), None)
    np.testing.assert_allclose(got[P_RLD], 0.0)
    np.testing.assert_allclose(got[P_RLD_MD], [1.0, 2.0, 0.0, 0.0])


def test_the_policy_threshold_and_the_backlog_router():
    pol = Policy(router="hit_threshold", relay_hit_threshold={"at_or_below": 0.6, "source": "x"})
    got = routed.router_flows(_milp(), CLS, RATE, pol, 500)
    np.testing.assert_allclose(got[P_RLD], [1.0, 0.0, 3.0, 0.0])
    np.testing.assert_allclose(got[P_MD], [0.0, 0.0, 0.0, 4.0])
    # the backlog router routes on the line's state: no per-class rule, the MILP's shares stand
    assert routed.router_flows(_milp(), CLS, RATE, Policy(router="backlog"), 500) is None
    # no relay pool, or no relay path: nothing to re-route
    assert routed.router_flows(_milp(), CLS, RATE, Policy(), 500, has_relay=False) is None
    assert routed.router_flows({P_MD: RATE * W}, CLS, RATE, Policy(), 500) is None


def test_crossing_weight_per_stratum():
    """Two strata per class: each gets its class's crossing fraction times its own weight."""
    nodes = RequestClasses(
        np.full(8, 1000.0), np.repeat(CLS.output_tokens, 2), np.repeat(CLS.hit_p, 2),
        np.zeros(8), np.repeat(W / 2, 2),
    )  # fmt: skip
    cls = RequestClasses(
        CLS.input_tokens, CLS.output_tokens, CLS.hit_p, CLS.hit_d, W,
        nodes=nodes, node_class=np.repeat(np.arange(4), 2),
    )  # fmt: skip
    flows = routed.router_flows(_milp(), cls, RATE, Policy(), 500)
    crosses = {P_MD: True, P_RLD_MD: True, P_RLD: False}
    got = routed.crossing_weight(flows, crosses, cls)
    np.testing.assert_allclose(got, [0, 0, 0.1, 0.1, 0.15, 0.15, 0.2, 0.2])
