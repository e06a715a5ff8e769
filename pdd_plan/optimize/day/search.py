"""The day's cheapest fleet of one architecture: every prefill choice at each pool size from
the smallest that carries the busiest period (the pool is base, sized for the day), one
operating-points MILP per combination over the line options that carry the peak period's
bytes, cheapest fixed cost first; a combination whose fixed cost plus a lower bound on its
decode cannot beat the incumbent is skipped (fixed_rate.py's search, over a day).

A day with elastic capacity is also planned held: one fleet all day, no elastic instance (so
none joins cold), over the busiest period's combination; the cheaper day is the plan. So a day
never costs more than the busiest period's fleet held all day, whatever on-demand costs, and
its elastic instances are bought only where they save."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from pdd_plan.architectures import Architecture
from pdd_plan.optimize import diagnosis, milp, owned, points, tables
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.day import day_points, prefill
from pdd_plan.optimize.day.day_problem import DayProblem
from pdd_plan.optimize.day.elastic import elastic_of
from pdd_plan.optimize.day.prefill import PrefillDay
from pdd_plan.optimize.search import enumeration, fixed_rate
from pdd_plan.optimize.search.enumeration import (
    Combo,
    Shared,
    decode_lb_per_rps,
    line_cost_lb,
    prefill_choices,
)
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.optimize.tables import LineOption
from pdd_plan.workload.periods import Day, reweighted


@dataclass
class Tightened:
    """Per period, caps a missed replay tightened (verify.py): decode speed and line level
    factors (1: as planned)."""

    decode: np.ndarray
    line: np.ndarray

    @classmethod
    def none(cls, n: int) -> Tightened:
        return cls(np.ones(n), np.ones(n))


@dataclass(frozen=True)
class DaySolved:
    architecture: str
    combo: Combo
    lines: list[LineOption]
    points: points.OperatingPoints
    solution: milp.PointsSolution
    shared: Shared
    seconds: float
    milps: int
    prefill: PrefillDay | None = None  # the pool's base and per-period instances

    @property
    def cost_per_hour(self) -> float:
        """The day's $/hour: the MILP's (base, elastic decode, line) and elastic prefill."""
        extra = 0.0
        if self.prefill is not None:
            extra = self.prefill.elastic_cost_day(self.day) / self.day.hours  # type: ignore[arg-type, union-attr]
        return self.solution.cost_per_hour + extra

    day: Day | None = None


def combos(dp: DayProblem, spec: Architecture, day: Day, caps: Caps, findings) -> list[Combo]:
    """Pool sizes from the smallest whose utilization stays under the prefill cap in every
    period (each at its own mix) to `max_prefill_extra` more."""
    pb = dp.pb
    extra = pb.search.max_prefill_extra
    out = []
    for ch in prefill_choices(pb.sites, pb.catalog, pb.sla, spec, day.classes, findings):
        load = max(p.rate_rps * float(np.dot(p.class_weight, ch.service)) for p in day.periods)
        n_min = int(np.floor(load / caps.prefill)) + 1
        if n_min > ch.max_n:
            findings.too_few_gpus(ch.pinst, n_min)
            continue
        for n_p in range(n_min, min(n_min + extra, ch.max_n + 1)):
            cost = owned.pool_cost(pb.owned, pb.sites.prefill, ch.pinst, n_p)
            out.append(
                Combo(ch.md_dc, ch.pinst, ch.service, n_p, n_p, load / n_p, cost, ch.md, ch.rld)
            )
    return out


def _lines(dp: DayProblem, sh: Shared, day: Day) -> list[LineOption]:
    if not sh.spec.crosses_line:
        return [tables.rdma_option()]
    joins = dp.elastic is not None
    load = day_points.peak_load(sh, day, day_points.warmup_factor(sh, day, dp.pb.model, joins))
    pb = dp.pb
    return tables.line_options_at_load(pb.lines, pb.max_lines, pb.owned, load, sh.caps.line)


def _price_floor(dp: DayProblem) -> float:
    """The cheapest elastic price as a share of the base's (1 without elastic)."""
    if dp.elastic is None or not dp.on_demand:
        return 1.0
    return min(1.0, *(x / dp.base_price(g) for g, x in dp.on_demand.items()))


def busiest(day: Day) -> int:
    """The period with the most requests per second (the first of equals)."""
    return int(np.argmax([p.rate_rps for p in day.periods]))


def peak_plan(dp: DayProblem, spec: Architecture, day: Day, caps: Caps) -> SolverResult:
    """The single-rate plan of the busiest period (its rate and mix)."""
    k = busiest(day)
    cls = reweighted(day.classes, day.periods[k].class_weight)
    return fixed_rate.plan(dp.pb, spec, cls, max(day.periods[k].rate_rps, day_points.MIN_RPS), caps)


def plan_day(
    dp: DayProblem,
    spec: Architecture,
    day: Day,
    caps: Caps,
    tight: Tightened | None = None,
    lag: bool = True,
    seed: SolverResult | None = None,
) -> DaySolved:
    """The cheapest day of `spec` over the combination of the busiest period's plan (`seed`,
    planned here if not given) and the line options no dearer than its line; when that finds
    no day, every combination and line option (the fixed-rate search's enumeration over the
    day). InfeasibleError with reasons if none. `lag` False: elastic runs cost nothing beyond
    their periods (a check's setting)."""
    t0 = time.perf_counter()
    seed = seed or peak_plan(dp, spec, day, caps)
    assert seed.tables is not None  # a solved plan keeps its tables
    cb = seed.tables.meta["combo"]
    line_cost = seed.tables.lines[seed.solution.line_index].cost_per_hour
    sh = Shared.of(dp.pb, spec, day.classes, caps)
    local = enumeration.one_datacenter(dp.pb.sites, cb)
    tight = tight or Tightened.none(len(day.periods))
    # the day as planned (elastic where the scenario has it), then held all day
    ways = [dp, held(dp)] if dp.elastic is not None else [dp]
    days = [_seeded(d, sh, day, cb, local, line_cost, tight, lag) for d in ways]
    milps = len(ways)
    if days[0] is None:  # no day over the busiest period's combination: every combination's
        days[0], n = search_all(dp, spec, day, caps, tight, lag, incumbent=days[-1])
        milps += n
    # the cheaper; at equal cost the fewer instances, then the held fleet (none to start)
    best = min((d for d in reversed(days) if d is not None), key=_rank)
    return dataclasses.replace(best, seconds=time.perf_counter() - t0, milps=milps)


def _seeded(
    dp: DayProblem,
    sh: Shared,
    day: Day,
    cb: Combo,
    local: bool,
    line_cost: float,
    tight: Tightened,
    lag: bool,
) -> DaySolved | None:
    """The day over the busiest period's combination `cb` and the line options no dearer than
    its plan's line (`line_cost`); None if it finds none."""
    lines = [tables.rdma_option()] if local else _lines(dp, sh, day)
    cheap = [ln for ln in lines if ln.cost_per_hour <= line_cost * (1 + 1e-9)]
    return _solve(dp, sh, day, cb, cheap, tight, lag) if cheap else None


def _rank(ds: DaySolved) -> tuple[float, int]:
    """Cost ($/hour to the micro-dollar), then the instance-hours the day deploys."""
    sol = ds.solution
    n = sum(sol.counts.values()) * len(sol.points) + sum(
        sum(p.elastic.values()) for p in sol.points
    )
    if ds.prefill is not None:
        n += sum(ds.prefill.per_period)
    return round(ds.cost_per_hour, 6), n


def held(dp: DayProblem) -> DayProblem:
    """The day planned held: no elastic capacity, one fleet for every period."""
    return dataclasses.replace(dp, elastic=None)


def _solve(
    dp: DayProblem,
    sh: Shared,
    day: Day,
    cb: Combo,
    lines: list[LineOption],
    tight: Tightened,
    lag: bool,
) -> DaySolved | None:
    pooled = dp.sla_over == "day"
    per = prefill.pools(dp, day, cb)
    # smaller pools in quiet periods; when they break a period's TTFT rows, the whole pool
    tries = [per, np.full(len(per), cb.n_lo)] if per.min() < cb.n_lo else [per]
    for pools in tries:
        pd = prefill.plan_prefill(dp, day, cb, pools, lag)
        taken = prefill.taken(dp, cb, pd)
        el = elastic_of(dp, day, day.classes, [o.cand for o in cb.md + cb.rld], lag, taken)
        found = []
        for e, joins in _main_decode_ways(el, cb):
            pts = day_points.day_points(
                sh, dp.pb.model, cb, lines, day, e, pooled, tight.decode, tight.line, pools,
                pd.base, main_joins=joins,
            )  # fmt: skip
            sol = milp.solve_points(pts, "cost", 0.0, dp.pb.search.time_limit_s)
            if sol is not None:
                found.append(DaySolved(sh.spec.name, cb, lines, pts, sol, sh, 0.0, 0, pd, day))
        if found:  # the cheaper (the first of equals: main decode elastic)
            return min(found, key=lambda d: round(d.cost_per_hour, 6))
    return None


def _main_decode_ways(
    el: points.Elastic | None, cb: Combo
) -> list[tuple[points.Elastic | None, bool | None]]:
    """The elastic capacity as given (main-decode instances may join, and a joining one's
    cold cache puts its prefixes on the line: day_points' warm-up), and, where relay decode
    can scale at sites of its own, the same with main decode held all day: nothing joins
    across the line, so no warm-up bytes. Without the second, an elastic day paid warm-up bytes
    even where only relay instances were added, and could be infeasible where the held day
    was not (a held fleet is an elastic day that buys nothing)."""
    if el is None or not cb.rld:
        return [(el, None)]
    md_sites = {(o.cand.datacenter, o.cand.gpu) for o in cb.md}
    rld_sites = {(o.cand.datacenter, o.cand.gpu) for o in cb.rld}
    if md_sites & rld_sites:
        return [(el, None)]
    cols = [j for j, site in enumerate(el.sites) if site in md_sites]
    if not cols:
        return [(el, None)]
    gpus = el.gpus.copy()
    gpus[:, cols] = 0
    return [(el, None), (dataclasses.replace(el, gpus=gpus), False)]


def search_all(
    dp: DayProblem,
    spec: Architecture,
    day: Day,
    caps: Caps,
    tight: Tightened,
    lag: bool,
    incumbent: DaySolved | None = None,
) -> tuple[DaySolved, int]:
    """Every combination, cheapest fixed cost first, with the fixed-rate search's bound
    (`incumbent`: a day found already, the one to beat)."""
    pb = dp.pb
    findings = diagnosis.Findings(pb.sites, pb.catalog, pb.sla, spec, day.classes)
    cands = combos(dp, spec, day, caps, findings)
    if not cands:
        raise diagnosis.no_combinations(pb.sites, pb.sla, spec, findings.reasons())
    sh = Shared.of(pb, spec, day.classes, caps)
    lines = _lines(dp, sh, day)
    if not lines and not any(enumeration.one_datacenter(pb.sites, cb) for cb in cands):
        reason = diagnosis.line_reason(
            pb.model, pb.policy, pb.lines, pb.max_lines, day.classes, day.peak_rps, caps
        )
        raise diagnosis.infeasible(spec.name, [*findings.reasons(), reason], pb.sla)
    line_lb = line_cost_lb(pb.owned, pb.lines, spec)
    floor = _price_floor(dp)
    cands.sort(key=lambda c: c.fixed_cost)
    best = incumbent
    milps = 0
    for cb in cands:
        local = enumeration.one_datacenter(pb.sites, cb)
        cb_lines = [tables.rdma_option()] if local else lines
        if not cb_lines:
            continue
        decode_lb = decode_lb_per_rps(day.classes, cb.md + cb.rld, caps.decode, pb.owned)
        lb = cb.fixed_cost + (0.0 if local else line_lb) + day.mean_rps * decode_lb * floor
        if best is not None and lb >= best.cost_per_hour * (1 - 1e-9):
            continue  # bound: cannot beat the incumbent
        milps += 1
        sol = _solve(dp, sh, day, cb, cb_lines, tight, lag)
        if sol is not None and (best is None or sol.cost_per_hour < best.cost_per_hour - 1e-9):
            best = sol
    if best is None:
        reasons = findings.reasons() or [diagnosis.pools_reason(True)]
        raise diagnosis.infeasible(spec.name, reasons, pb.sla)
    return best, milps
