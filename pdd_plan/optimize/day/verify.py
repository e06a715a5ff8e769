"""The day's replay: each period's fleet (base + its elastic instances) replayed at the period's
rate and request mix, the rate piecewise constant (a non-homogeneous Poisson process with one
rate per period: each period is a homogeneous stretch of it), the SLA checked per period (or,
with `sla.over: day`, over the day's requests pooled, each period's weighed by its requests).

A period whose replay misses re-solves the whole day with that period's caps tightened (its
decode speed 10% lower, `search.Tightened`; a line miss first stretches the day's line
transfer-time estimate, as the single-rate loop does, then lowers the period's line level; a
prefill miss tightens the pool's cap for the day), at most `rounds` times; when a re-solve finds
no day, the last day is reported with its misses.

What the replay does not model: the queues a period hands to the next. Each period starts with
empty queues and is judged past its warm-up (MSER-5), and the fleet changes at the boundary:
elastic instances are started `elastic.startup_minutes` early (the plan pays for that) so they
serve from the boundary, and one scaled down takes no new requests and drains (paid, its
decodes finish: they do not count against the next period's SLA).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pdd_plan.architectures import get
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.inputs.pieces import ReplaySetup
from pdd_plan.inputs.schema.day_plan import PeriodReplay
from pdd_plan.optimize import summary as optimize_summary
from pdd_plan.optimize.day import search
from pdd_plan.optimize.day.problem import DayProblem
from pdd_plan.optimize.day.summary import period_plan, period_result, replay_plan
from pdd_plan.optimize.search.caps import Caps
from pdd_plan.sim.run import checked
from pdd_plan.sim.run import replay_plan as sim_replay
from pdd_plan.workload.periods import Day

MIN_REQUESTS = 400  # a period's replay is never shorter (its P99 needs a few misses to see)


def period_setup(dp: DayProblem, k: int) -> ReplaySetup:
    """The replay setup as period k: its rate and (for workload.periods) its own
    distributions."""
    return dataclasses.replace(dp.replay, workload=dp.period_workloads[k])


def _quantile(x: np.ndarray, w: np.ndarray, q: float) -> float | None:
    if not len(x):
        return None
    o = np.argsort(x, kind="stable")
    c = np.cumsum(w[o])
    return float(x[o][min(np.searchsorted(c, q * c[-1]), len(x) - 1)])


def replay_day(
    dp: DayProblem, ds: search.DaySolved, day: Day, n_requests: int
) -> tuple[list, list]:
    """Per period: (PeriodReplay, the checked summary); equal periods (rate, mix, fleet) share
    one replay."""
    a = ds.architecture
    template = period_plan(ds, day, search.busiest(day))
    seen: dict[tuple, tuple] = {}
    out, raw = [], []
    for k, p in enumerate(day.periods):
        sol = ds.solution.points[k]
        key = (p.rate_rps, p.class_weight.tobytes(), tuple(sorted(sol.elastic.items())))
        if key not in seen:
            rs = period_setup(dp, k)
            plan = replay_plan(ds, day, k, template)
            n = max(MIN_REQUESTS, int(n_requests))
            # one seed: periods of one mix replay the same requests at their own rates (common
            # random numbers, and the simulator's perf tables are reused)
            res = sim_replay(rs, plan, a, n, dp.replay.seed)
            v = checked(rs, res)
            kept = res.kept()
            seen[key] = (v, res.ttft_s[kept], res.tpot_s[kept])
        v, ttft, tpot = seen[key]
        c = v["checks"]
        out.append(
            PeriodReplay(
                requests=int(v["requests"]),
                ttft_p90_s=c["ttft_p90"]["simulated"],
                ttft_p99_s=c["ttft_p99"]["simulated"],
                tpot_p90_ms=c["tpot_p90"]["simulated"],
                sla_met=bool(v["sla_met"]),
            )
        )
        raw.append((v, ttft, tpot))
    return out, raw


def day_met(dp: DayProblem, day: Day, raw: list) -> bool:
    """sla.over: day: the pooled TTFT percentiles and TPOT P90 over the day's requests, each
    period's replayed requests weighed by its requests over their count."""
    sla = dp.pb.sla
    ttft = np.concatenate([r[1] for r in raw])
    tpot = np.concatenate([r[2] for r in raw])
    w = np.concatenate(
        [
            np.full(len(r[1]), p.rate_rps * p.hours / max(len(r[1]), 1))
            for p, r in zip(day.periods, raw)
        ]
    )
    p90, p99, t90 = _quantile(ttft, w, 0.9), _quantile(ttft, w, 0.99), _quantile(tpot, w, 0.9)
    return (
        p90 is not None
        and p90 <= sla.ttft_p90_s
        and p99 <= sla.ttft_p99_s
        and t90 * 1e3 <= sla.tpot_ms
    )


def verified_day(
    dp: DayProblem, a: str, day: Day, n_requests: int, rounds: int
) -> tuple[search.DaySolved, list[PeriodReplay], int, float, bool]:
    """Solve the day, replay it, and while a period misses tighten its caps and re-solve. Returns
    the day, its replays, the re-solves made, the busiest period's single-rate plan's $/hour at
    the day's final caps (24 h of it is what the day is compared with) and whether the replay
    met the SLA."""
    spec = get(a)
    caps = Caps(decode=dp.pb.search.decode_utilization)
    seed = search.peak_plan(dp, spec, day, caps)
    peak_cost = seed.cost_per_hour
    tight = search.Tightened.none(len(day.periods))
    over_day = dp.sla_over == "day"
    kept = None
    for i in range(rounds + 1):
        try:
            ds = search.plan_day(dp, spec, day, caps, tight, seed=seed)
        except InfeasibleError:
            if kept is None:
                raise
            return (*kept, i - 1, peak_cost, False)  # tighter caps leave no day: the last missed
        replays, raw = replay_day(dp, ds, day, n_requests)
        kept = (ds, replays)
        met = day_met(dp, day, raw) if over_day else all(r.sla_met for r in replays)
        if met or i == rounds:
            return ds, replays, i, peak_cost, met
        shared = {}  # the caps every period shares: the worst miss of each
        for k, (v, _t, _p) in enumerate(raw):
            b = v["bottleneck"]
            if v["sla_met"] or b is None:
                continue
            if b == "decode":
                tight.decode[k] *= 0.9
                continue
            used = optimize_summary.utilization(period_result(ds, day, k), b)
            if b == "line" and caps.line_delay >= 2.0:
                tight.line[k] *= 0.9  # the transfer estimate is stretched: cap this period
            else:
                shared[b] = min(shared.get(b, used), used)
        for b, used in sorted(shared.items()):
            # the line's transfer-time estimate first (as the single-rate loop), the prefill cap
            caps = caps.tightened(b, used)
        if shared:  # the busiest period's plan at the day's caps: what the day is compared with
            seed = search.peak_plan(dp, spec, day, caps)
            peak_cost = seed.cost_per_hour
    raise AssertionError("unreachable")
