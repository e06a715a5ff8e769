"""The day's verification loop (optimize/day/verify.py): a period whose replay misses re-solves
the whole day with that period's caps tightened, and only that period's."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pdd_plan.optimize.day import search, verify
from pdd_plan.outputs.day_plan import PeriodReplay
from pdd_plan.sim.verdict import Verdict


def _ctx(over: str = "period"):
    """The pieces of a DayProblem the loop reads."""
    sla = SimpleNamespace(ttft_p90_s=1.0, ttft_p99_s=2.0, tpot_ms=50.0)
    pb = SimpleNamespace(
        sla=sla,
        search=SimpleNamespace(
            decode_utilization=0.9, prefill_utilization=0.97, line_utilization=0.95
        ),
    )
    return SimpleNamespace(pb=pb, sla_over=over)


def _replay(ok: bool) -> PeriodReplay:
    return PeriodReplay(requests=400, ttft_p90_s=0.5, ttft_p99_s=1.0, tpot_p90_ms=40, sla_met=ok)


@pytest.mark.unit
@pytest.mark.parametrize("bottleneck", ["decode", "line"])
def test_a_miss_tightens_that_periods_cap_and_re_solves(monkeypatch, bottleneck):
    day = SimpleNamespace(periods=[SimpleNamespace(rate_rps=r, hours=8) for r in (1, 2, 3)])
    seen: list[search.Tightened] = []

    caps_seen = []

    def plan_day(ctx, spec, d, caps, tight, seed=None):
        seen.append(search.Tightened(tight.decode.copy(), tight.line.copy()))
        caps_seen.append(caps)
        return SimpleNamespace(round=len(seen))

    def replay_day(ctx, ds, d, n):
        miss = ds.round == 1  # the first day misses in period 1, the re-solved one meets
        rows = [_replay(not (miss and k == 1)) for k in range(3)]
        raw = [(Verdict(r.sla_met, None if r.sla_met else bottleneck), 0, 0) for r in rows]
        return rows, raw

    monkeypatch.setattr(search, "peak_plan", lambda *a: SimpleNamespace(cost_per_hour=9.0))
    monkeypatch.setattr(search, "plan_day", plan_day)
    monkeypatch.setattr(verify, "replay_day", replay_day)
    monkeypatch.setattr(verify, "get", lambda a: a)
    # the line's use in the missing period: 0.6 of its capacity
    monkeypatch.setattr(verify, "period_result", lambda *a: None)
    monkeypatch.setattr(verify.optimize_summary, "utilization", lambda p, b: 0.6)
    ds, replays, rounds, peak, met = verify.verified_day(_ctx(), "x", day, 400, 4)
    assert met and rounds == 1 and peak == 9.0 and len(seen) == 2
    assert np.all(seen[0].decode == 1) and np.all(seen[0].line == 1)
    if bottleneck == "decode":  # that period's decode speed, 10% lower; the day's caps kept
        assert np.allclose(seen[1].decode, [1.0, 0.9, 1.0]) and caps_seen[1] == caps_seen[0]
    else:  # the day's line transfer estimate stretched first (as the single-rate loop)
        assert np.all(seen[1].decode == 1) and np.all(seen[1].line == 1)
        assert caps_seen[1].line_delay > caps_seen[0].line_delay


@pytest.mark.unit
def test_the_day_pooled_percentile_weighs_periods_by_their_requests():
    # period 0: 100 req/s, every TTFT 0.5 s; period 1: 2 req/s, every TTFT 5 s. Pooled,
    # period 1 is 2/102 = 2% of the day's requests: the P90 is 0.5 s (met), the P99 5 s
    # (missed, target 2 s); at 0.5 req/s (0.5%) the P99 is 0.5 s
    day = SimpleNamespace(
        periods=[SimpleNamespace(rate_rps=100, hours=12), SimpleNamespace(rate_rps=2, hours=12)]
    )
    raw = [({}, np.full(400, 0.5), np.full(400, 0.01)), ({}, np.full(400, 5.0), np.full(400, 0.01))]
    assert (
        verify._quantile(
            np.concatenate([r[1] for r in raw]), np.r_[np.full(400, 3.0), np.full(400, 0.03)], 0.9
        )
        == 0.5
    )
    assert not verify.day_met(_ctx("day"), day, raw)
    day.periods[1].rate_rps = 0.5
    assert verify.day_met(_ctx("day"), day, raw)


@pytest.mark.unit
def test_a_re_solve_that_finds_no_day_reports_the_last_days_misses(monkeypatch):
    from pdd_plan.common.errors import InfeasibleError  # only this test raises it

    day = SimpleNamespace(periods=[SimpleNamespace(rate_rps=1, hours=24)])
    calls = []

    def plan_day(ctx, spec, d, caps, tight, seed=None):
        calls.append(1)
        if len(calls) > 1:
            raise InfeasibleError("no day")
        return SimpleNamespace(round=1)

    def replay_day(ctx, ds, d, n):
        return [_replay(False)], [(Verdict(False, "decode"), 0, 0)]

    monkeypatch.setattr(search, "peak_plan", lambda *a: SimpleNamespace(cost_per_hour=1.0))
    monkeypatch.setattr(search, "plan_day", plan_day)
    monkeypatch.setattr(verify, "replay_day", replay_day)
    monkeypatch.setattr(verify, "get", lambda a: a)
    ds, replays, rounds, _peak, met = verify.verified_day(_ctx(), "x", day, 400, 4)
    assert not met and rounds == 0 and ds.round == 1 and not replays[0].sla_met
