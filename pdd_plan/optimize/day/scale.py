"""The best day BCR (`day_scale: free`): the scale s of the whole rate profile (every period's
rate times s) whose cheapest day serves the most requests per dollar.

The day's cost at scale s is the min-cost day plan (search.plan_day); it is a step function of
s (integer instances, discrete lines), so s x requests / cost(s) peaks at the right end of a
step. The search plans the day on a coarse grid of s (GRID, 0.5x..2x) and at the scale where
the busiest period alone has its best BCR (the single-rate bcr objective, Dinkelbach, at that
period's rate and mix: a flat day's optimum), then bisects to the right of the best of those
for the largest s that costs the same (its step's right end), moving to a dearer step when it
has the better BCR; each point is one day plan. It
returns the best of the scales it planned, no more: the BCR is a sawtooth in s, and a step
whose right end lies between the points planned can be missed.
"""

from __future__ import annotations

import dataclasses

from pdd_plan.architectures import Architecture
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.optimize import summary as optimize_summary
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.day import search
from pdd_plan.optimize.day.day_problem import DayProblem
from pdd_plan.optimize.search import objectives
from pdd_plan.workload.periods import Day, reweighted

GRID = (0.5, 0.75, 1.0, 1.5, 2.0)  # multiples of the profile; 1 is the day as given
BISECTIONS = 4  # halvings of the bracket: a step's right end within 1/16 of the grid spacing
SAME_COST = 1e-9  # relative: two days cost the same


@dataclasses.dataclass(frozen=True)
class Tried:
    """One evaluated scale: the day's $ and its BCR (None: no day at that scale)."""

    scale: float
    cost_day: float | None
    bcr: float | None


def scaled(dp: DayProblem, s: float) -> DayProblem:
    """The day problem with every period's rate times `s` (mixes unchanged)."""
    periods = tuple(dataclasses.replace(p, rate_rps=p.rate_rps * s) for p in dp.day.periods)
    day = Day(dp.day.classes, periods, dp.day.from_trace)
    loads = tuple(
        w.model_copy(update={"rate_rps": max(p.rate_rps, 1e-3)})
        for w, p in zip(dp.period_workloads, periods)
    )
    return dataclasses.replace(dp, day=day, period_workloads=loads)


def evaluate(dp: DayProblem, spec: Architecture, s: float, caps: Caps) -> Tried:
    """The cheapest day at scale `s` and its BCR (requests per second per $/hour)."""
    sd = scaled(dp, s)
    try:
        ds = search.plan_day(sd, spec, sd.day, caps)
    except InfeasibleError:
        return Tried(s, None, None)
    cost = ds.cost_per_hour  # the day's mean $/hour: base, elastic (drains included), line
    return Tried(s, cost * sd.day.hours, optimize_summary.bcr(sd.day.mean_rps, cost))


def _cost(t: Tried) -> float:
    return float("inf") if t.cost_day is None else t.cost_day


def peak_scale(dp: DayProblem, spec: Architecture, caps: Caps) -> float | None:
    """The scale at which the busiest period alone has its best BCR: the single-rate bcr
    objective (Dinkelbach) at that period's mix, its rate over the period's. None if it has
    no plan. A flat day's best scale is this one (a flat day is the single-rate plan)."""
    k = search.busiest(dp.day)
    peak = dp.day.periods[k]
    try:
        p = objectives.dinkelbach(
            dp.pb, spec.name, reweighted(dp.day.classes, peak.class_weight), caps
        )
    except InfeasibleError:
        return None
    return p.rate / peak.rate_rps if peak.rate_rps > 0 and p.rate > 0 else None


def best_scale(dp: DayProblem, spec: Architecture, caps: Caps) -> tuple[float, list[Tried]]:
    """The scale with the best day BCR among those evaluated, and every evaluation (grid
    first, then the busiest period's best scale, then the bisection's, in order).
    InfeasibleError (the profile's own) if none has a day."""
    tried = [evaluate(dp, spec, s, caps) for s in GRID]
    s_peak = peak_scale(dp, spec, caps)
    if s_peak is not None and s_peak not in GRID:
        tried.append(evaluate(dp, spec, s_peak, caps))
    ok = [t for t in tried if t.bcr is not None]
    if not ok:
        search.plan_day(dp, spec, dp.day, caps)  # raises the profile's own reasons
        raise InfeasibleError(f"{spec.name}: no day at any scale of the profile")
    ranked = sorted(tried, key=lambda t: t.scale)
    j = ranked.index(max(ok, key=lambda t: t.bcr))  # type: ignore[arg-type, return-value]
    # the step holding point i ends before point i+1: bisect right of the best point (or, when
    # it is the largest scale planned, right of the one before, whose step may end just short)
    i = j if j + 1 < len(ranked) else j - 1
    if i >= 0 and ranked[i].bcr is not None:
        lo, hi = ranked[i], ranked[i + 1]
        for _ in range(BISECTIONS):
            top = max(t.bcr for t in tried if t.bcr is not None)
            mid = evaluate(dp, spec, 0.5 * (lo.scale + hi.scale), caps)
            tried.append(mid)
            # the same cost: lo's step reaches mid; a dearer mid with a better BCR: a better
            # step, whose right end is sought from here on (Dinkelbach's move to a better ratio)
            if _cost(mid) <= _cost(lo) * (1 + SAME_COST) or (mid.bcr or 0.0) > top:
                lo = mid
            else:
                hi = mid
    best = max((t for t in tried if t.bcr is not None), key=lambda t: t.bcr)  # type: ignore[arg-type, return-value]
    return best.scale, tried
