"""The prefill pool over a day: base instances paid every hour, elastic ones where a period's
load needs more.

Each period runs the smallest pool that keeps its prefill utilization (its rate times its
mix's mean service time, over the instances) at or under the busiest period's in the day's
combination, so a quiet period's prefill wait is about the busiest's (the pool's TTFT tables
are rebuilt at its own size). Without `elastic:` every period keeps the whole pool: it is paid
all day anyway.

The base is the count b that makes the day cheapest: b instances x the day's hours at the base
price (owned GPUs first, at their owned price: search/owned.pool_cost), plus per period the
instances above b at the on-demand price, plus each run's extra hours (start-up, drain: one
mean service time, billing round-up; elastic.py) - exact for these counts, and searched over
every b from 0 to the busiest period's pool. What the prefill datacenter can add per period
(`elastic.max_gpus`) bounds the elastic ones; the GPUs they take are not left to
elastic decode instances there. Owned GPUs are never elastic (they are there all day): a
period buys elastic instances only once the base uses every owned GPU of the site (those
owned at no more than on-demand; `owned_first`), and the base's owned share is priced at the
owned price, assuming prefill takes the site's owned GPUs first; the MILP then splits the
owned GPUs between the base pool and decode exactly (milp/fleet.define_owned).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdd_plan.optimize.day import elastic
from pdd_plan.optimize.day.problem import DayProblem
from pdd_plan.optimize.search import owned
from pdd_plan.optimize.search.enumeration import Combo
from pdd_plan.workload.periods import Day


@dataclass(frozen=True)
class PrefillDay:
    base: int
    per_period: tuple[int, ...]  # instances in each period, base included
    gpus_per_instance: int
    base_price: float  # $/hour per instance
    elastic_price: float
    run_hours: float  # paid per run beyond its periods

    def elastic(self, k: int) -> int:
        return self.per_period[k] - self.base

    def elastic_cost_day(self, day: Day) -> float:
        """$ per day of the elastic instances, their runs' extra hours included."""
        e = [self.elastic(k) for k in range(len(self.per_period))]
        serve = sum(n * p.hours for n, p in zip(e, day.periods)) * self.elastic_price
        starts = sum(max(e[k] - e[k - 1], 0) for k in range(len(e)))
        return serve + starts * self.run_hours * self.elastic_price


def pools(dp: DayProblem, day: Day, cb: Combo) -> np.ndarray:
    """Each period's pool (see the module docstring)."""
    n_peak = cb.n_lo
    if dp.elastic is None:
        return np.full(len(day.periods), n_peak)
    load = np.array([p.rate_rps * float(np.dot(p.class_weight, cb.service)) for p in day.periods])
    rho = float(load.max()) / n_peak
    return np.array([min(n_peak, max(1, math.ceil(x / rho - 1e-9))) for x in load])


def _prices(dp: DayProblem, cb: Combo) -> tuple[float, float]:
    base = cb.pinst.cost_per_hour
    g = cb.pinst.gpu.name
    unit = dp.base_price(g)
    return base, base * dp.on_demand.get(g, unit) / unit


def _run_hours(dp: DayProblem, day: Day, cb: Combo, lag: bool) -> float:
    if not lag or dp.elastic is None:
        return 0.0
    el = dp.elastic
    mean_s = float(np.dot(day.classes.weight, cb.service))
    return elastic.paid_hours(day, el.startup_minutes + mean_s / 60.0, el.billing_minutes)


def plan_prefill(dp: DayProblem, day: Day, cb: Combo, per: np.ndarray, lag: bool) -> PrefillDay:
    """The cheapest base for per-period pools `per`."""
    base_p, el_p = _prices(dp, cb)
    rh = _run_hours(dp, day, cb, lag)
    gpi = cb.pinst.n_gpus
    site = (dp.pb.sites.prefill, cb.pinst.gpu.name)
    cap = np.zeros(len(per))
    if dp.elastic is not None:
        sites, gpus = elastic.max_gpus(dp, day)
        if site in sites:
            cap = gpus[:, sites.index(site)] // gpi
    hours = day.hours
    first = owned_first(dp, cb)
    best = None
    for b in range(int(per.max()) + 1):
        if np.any(per - b > cap) or (np.any(per > b) and b * gpi < first):
            continue  # more than the site can add, or elastic while owned GPUs sit outside
        # a period runs at least the base (paid all day): the pool is never smaller than it
        pd = PrefillDay(b, tuple(max(int(x), b) for x in per), gpi, base_p, el_p, rh)
        held = owned.pool_cost(dp.pb.owned, site[0], cb.pinst, b)  # owned GPUs first
        cost = held * hours + pd.elastic_cost_day(day)
        if best is None or cost < best[0] - 1e-9:
            best = (cost, pd)
    assert best is not None  # b = max(per) adds nothing
    return best[1]


def owned_first(dp: DayProblem, cb: Combo) -> int:
    """GPUs owned at the prefill site that the base must use before elastic instances are
    bought (those owned at no more than the on-demand price; 0: none)."""
    g = cb.pinst.gpu.name
    og = owned.gpus(dp.pb.owned).get((dp.pb.sites.prefill, g))
    if og is None or og.price > dp.on_demand.get(g, dp.base_price(g)):
        return 0
    return og.count


def taken(dp: DayProblem, cb: Combo, pd: PrefillDay) -> tuple[str, str, np.ndarray]:
    """(datacenter, GPU, GPUs per period) the elastic prefill instances take."""
    e = np.array([pd.elastic(k) for k in range(len(pd.per_period))], dtype=float)
    return dp.pb.sites.prefill, cb.pinst.gpu.name, e * pd.gpus_per_instance
