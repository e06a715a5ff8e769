"""The decode replay's named states and events, one event method against hand arithmetic, and
the line's occupancy integrals."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.sim.decode.decoder import DecodeInputs, Decoder, Engine, static_events
from pdd_plan.sim.queues import Route, _occupancy
from pdd_plan.sim.states import Event, State

pytestmark = pytest.mark.unit


class _Steps:
    """Step seconds by batch, one context column (0.5 s alone, 1 s at two)."""

    cols = [[0.5, 0.5, 1.0]]

    def __call__(self, b: int, ctx: float) -> float:
        return self.cols[0][min(b, 2)]


def _inputs(out: list[int], t: list[float]) -> DecodeInputs:
    n = len(out)
    z = np.zeros(n)
    a = np.asarray(t)
    return DecodeInputs(
        np.zeros(n, np.int8), a, a, np.asarray(out), z + 1, z + 1, z, z, [Engine(_Steps(), 2, 1e30)]
    )


def test_static_events_order_ties_by_kind_then_request() -> None:
    assert Event.KV_AT_RLD < Event.KV_AT_MD < Event.HANDOFF < Event.EXTENDED < Event.CAUGHT_UP
    assert [s.value for s in State] == [0, 1, 2, 3, 4, 5]
    route = np.array([Route.P_RLD_MD, Route.P_MD, Route.P_RLD], np.int8)
    t = np.array([1.0, 1.0, 1.0])
    inp = DecodeInputs(route, t, t, np.ones(3, np.int64), t, t, t, t, [])
    times, kinds, rids = static_events(inp)
    # at one instant: both KV-at-RLD (requests 0, 2), then p_md's KV at MD, then 0's handoff
    assert list(kinds) == [Event.KV_AT_RLD, Event.KV_AT_RLD, Event.KV_AT_MD, Event.HANDOFF]
    assert list(rids) == [0, 2, 1, 0]


def test_kv_at_md_and_departures_by_hand() -> None:
    d = Decoder(_inputs([4, 2], [0.0, 1.0]))
    d.kv_at_md(0, 0.0)
    # alone: a token each 0.5 s -> first at 0.5, done after 4 tokens at 2.0
    assert d.first[0] == 0.5 and d.nxt[0] == 2.0 and d.status[0] == State.ON_MD
    d.kv_at_md(1, 1.0)
    # at t=1 request 0 has 2 tokens; both need 2 more at 1 s a step -> both leave at 3.0
    assert d.first[1] == 2.0 and d.B[0] == 2 and d.nxt[0] == 3.0
    d.departures(0, 3.0)
    assert list(d.end) == [3.0, 3.0] and d.B[0] == 0 and d.nxt[0] == float("inf")
    assert d.area[0] == pytest.approx(1.0 * 1 + 2 * 2)  # batch-seconds


def test_occupancy_integrals_by_hand() -> None:
    start = np.array([0.0, 1.0, 5.0, np.nan])
    end = np.array([2.0, 3.0, 6.0, np.nan])  # the last one never sent (relay decode)
    busy, area, full = _occupancy(start, end, pool=2)
    assert (busy, area, full) == (4.0, 5.0, 1.0)
