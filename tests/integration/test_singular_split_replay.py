"""The planned p_rld share is the replay's per-request share (the split by hand:
tests/unit/latency/test_singular_split.py)."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.optimize import problem_of, summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.plan import plan_architecture
from pdd_plan.sim.queues import Route
from pdd_plan.sim.replay import planned_route
from pdd_plan.workload.classes import build_classes
from pdd_plan.workload.distributions import stratified_requests
from tests.unit.latency.test_singular_split import _ctx  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


@pytest.mark.integration
def test_planned_p_rld_share_is_the_replays_per_request_share():
    # narrow-line as its verification re-solves it (the line's delay stretched 1.37 x after the
    # no-relay plan misses the replay's P99): PDD relays its 0-80%-hit bins (12.4% of
    # requests); the replay sends a relayed request to p_rld when its own output is <= 500
    # tokens. The plan must put the same share there.
    ctx = _ctx("narrow-line")
    cls = build_classes(ctx.class_spec)
    rate = ctx.scenario.workload.rate_rps
    caps = Caps(decode=ctx.scenario.search.decode_utilization, line_delay=1.3717)
    p = plan_architecture(problem_of(ctx), "pdd", cls, rate, caps)
    s = summary.summarize(p, cls, rate, ctx.prefill_dc)
    w = ctx.scenario.workload
    req = stratified_requests(w, w.samples, ctx.scenario.seed, rate)  # the classes' draw
    routing = s.routing
    assert routing.relay_at_or_below_hit_rate == 0.8
    route = planned_route(req.hit_p, req.output_tokens, 0.8, routing.singular_max_output_tokens)
    want = float(np.mean(route == Route.P_RLD))
    assert 0.01 < want < 0.025  # a few short requests among the relayed 12.4% (1.8%)
    # tolerance: 1e-4: the plan rounds route shares to 4 decimals
    assert s.route_share.p_rld == pytest.approx(want, abs=1e-4)
    assert s.route_share.p_rld_md == pytest.approx(
        float(np.mean(route == Route.P_RLD_MD)), abs=1e-4
    )
