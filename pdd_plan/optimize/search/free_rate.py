"""The rate as a variable: most goodput (optionally within a budget), or one Dinkelbach step
(most rate - lambda * cost) toward the best goodput per dollar.

A `FreeRateSearch` enumerates once per architecture: prefill pool-size ranges x utilization
levels for each prefill choice, the line options, and (lazily) each combination's tables, none
of which depend on the objective or lambda. Each step then visits combinations best bound
first and stops solving once no bound beats the incumbent. Bounds: the static one (rate at most
the pool's capacity; cost at least its prefill and cheapest decode per req/s plus the cheapest
line), and, across steps with a growing lambda, F(lambda) <= F(lambda0) - (lambda - lambda0) *
(the combination's least cost), since rate - lambda * cost falls at least that fast.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from pdd_plan.architectures import Architecture
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import diagnosis, milp, owned, solved, tables
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Problem
from pdd_plan.optimize.search import combo_result, enumeration
from pdd_plan.optimize.search.enumeration import (
    Combo,
    Shared,
    decode_lb_per_rps,
    fleet_tables,
    line_cost_lb,
    prefill_choices,
)
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.workload.requests import RequestClasses

TOL = 1e-9


def cap_levels(levels: list[float], cap: float) -> list[float]:
    """The scenario's utilization levels clipped to a cap (a cap tightened below every level
    leaves the cap itself, not an empty search)."""
    return sorted({min(x, cap) for x in levels})


def buckets(max_n: int) -> list[tuple[int, int]]:
    """Prefill pool-size ranges for a variable rate: [1], [2], [3, 4], [5, 8], ... The wait is
    computed at the range's smallest size (Erlang C falls as servers are added at a fixed
    utilization), so each range is conservative."""
    out, lo = [], 1
    while lo <= max_n:
        hi = min(max(lo, 2 * (lo - 1)), max_n) if lo > 2 else lo
        out.append((lo, hi))
        lo = hi + 1
    return out


def upper_bound(
    objective: str, lam: float, r_ub: float, r_lo: float, per_rps: float, fixed_lb: float
) -> float:
    """The best objective a combination could reach: rate at most r_ub; cost at least
    per_rps x rate + fixed_lb (the pool's smallest size already sets r_lo's worth of prefill)."""
    if objective == "goodput":
        return r_ub
    slope = 1.0 - lam * per_rps
    r = r_ub if slope > 0 else r_lo
    return r * slope - lam * fixed_lb


def _affordable(left: float, per_rps: float) -> float:
    """The req/s `left` $/hour buys at `per_rps` $/hour per req/s: unbounded when each req/s
    costs nothing (owned GPUs at $0), so the pool, not the budget, bounds the rate."""
    return math.inf if per_rps <= 0 else max(left, 0.0) / per_rps


@dataclass(frozen=True)
class _Bound:
    """What a combination's static bound needs (fixed per search)."""

    r_ub: float  # most req/s its pool (and the budget) allows
    r_lo: float  # req/s its smallest pool size serves at the cap
    per_rps: float  # least $/hour per req/s: prefill share and the cheapest decode tokens
    min_cost: float  # least $/hour of any plan in it: the smallest pool and the cheapest line
    market_per_rps: float = 0.0  # per_rps at market prices (owned: per_rps prices them owned)
    discount: float = 0.0  # the most owned GPUs take off the market cost ($/hour)


class FreeRateSearch:
    """One architecture with the rate free; `solve` runs one objective (or Dinkelbach step)."""

    def __init__(
        self,
        pb: Problem,
        spec: Architecture,
        classes: RequestClasses,
        caps: Caps,
        budget: float | None = None,
        rate_cap: float | None = None,
    ):
        self.pb, self.spec, self.classes, self.caps = pb, spec, classes, caps
        self.budget, self.rate_cap = budget, rate_cap
        self.findings = diagnosis.Findings(pb.sites, pb.catalog, pb.sla, spec, classes)
        self.combos = self._enumerate()
        if not self.combos:
            raise diagnosis.no_combinations(pb.sites, pb.sla, spec, self.findings.reasons())
        self.combos.sort(key=lambda c: c.fixed_cost)  # ties go to the cheaper pool
        self.sh = Shared.of(pb, spec, classes, caps)
        levels = cap_levels(pb.search.utilization_levels, caps.line)
        self.lines = (
            tables.line_options(pb.lines, pb.max_lines, pb.owned, levels)
            if spec.crosses_line
            else [tables.rdma_option()]
        )
        self.line_lb = line_cost_lb(pb.owned, pb.lines, spec)
        self.bounds = [self._bound(cb) for cb in self.combos]
        self._tables: dict[int, tables.FleetTables] = {}
        self._infeasible: set[int] = set()  # the feasible set does not depend on the objective
        self._known: dict[int, tuple[float, float]] = {}  # i -> (lambda, F_i(lambda) at most)
        self._last_best: int | None = None
        self.reach: diagnosis.Reach = {}

    def _enumerate(self) -> list[Combo]:
        # the cap is a level too: the fixed-rate search runs a pool at any utilization up to the
        # cap, and at the 0.9 level alone the free-rate optimum paid a pool one instance larger
        # than the fixed-rate plan at its own rate (IDC-PD, default scenario: BCR 477 vs 492).
        # The line gets no such level (a quarter more binaries in every MILP): the fixed-rate
        # re-solve at the chosen rate (objectives.dinkelbach) runs it at its exact load.
        cap = self.caps.prefill
        pb = self.pb
        levels = sorted(set(cap_levels(pb.search.utilization_levels, cap)) | {cap})
        out = []
        for ch in prefill_choices(
            pb.sites, pb.catalog, pb.sla, self.spec, self.classes, self.findings
        ):
            for lo, hi in buckets(ch.max_n):
                for lv in levels:
                    cost = owned.pool_cost(pb.owned, pb.sites.prefill, ch.pinst, lo)
                    out.append(
                        Combo(ch.md_dc, ch.pinst, ch.service, lo, hi, lv, cost, ch.md, ch.rld)
                    )
        return out

    def _line_lb(self, cb: Combo) -> float:
        return 0.0 if enumeration.one_datacenter(self.pb.sites, cb) else self.line_lb

    def _bound(self, cb: Combo) -> _Bound:
        line_lb = self._line_lb(cb)
        es = float(np.dot(self.classes.weight, cb.service))
        r_ub = cb.rho * cb.n_hi / es
        pi, opts, cap = cb.pinst, cb.md + cb.rld, self.caps.decode
        per_rps = es / cb.rho * pi.cost_per_hour + decode_lb_per_rps(self.classes, opts, cap)
        # owned capacity: every GPU at its cheaper price (tight at low rates), or market price
        # less the most the owned GPUs can take off (tight at high rates); both are bounds
        prices, dc, g = self.pb.owned, self.pb.sites.prefill, pi.gpu.name
        floor = es / cb.rho * owned.floor_cost(prices, dc, g, pi.n_gpus, pi.cost_per_hour)
        floor += decode_lb_per_rps(self.classes, opts, cap, prices)
        off = owned.discount(prices)
        r_lo = min(r_ub, cb.rho * cb.n_lo / es)
        if self.budget is not None:
            r_ub = min(r_ub, _affordable(self.budget - line_lb, floor))
            r_ub = min(r_ub, _affordable(self.budget - line_lb + off, per_rps))
        return _Bound(r_ub, r_lo, floor, cb.fixed_cost + line_lb, per_rps, off)

    def _tables_of(self, i: int) -> tables.FleetTables:
        if i not in self._tables:
            cb = self.combos[i]
            es = float(np.dot(self.classes.weight, cb.service))
            rate = cb.rho * cb.n_lo / es
            chunk = self.pb.search.prefill_chunk_tokens
            pool = prefill_pool.PrefillPool.of(cb.pinst, cb.n_lo, self.classes, chunk, rate)
            local = enumeration.one_datacenter(self.pb.sites, cb)
            lines = [tables.rdma_option()] if local else self.lines
            self._tables[i] = fleet_tables(
                self.sh, cb, pool, lines, None, self.budget, self.rate_cap
            )
        return self._tables[i]

    def _ub(self, i: int, objective: str, lam: float, eff: float) -> float:
        """The best objective combination i could reach at this step."""
        b = self.bounds[i]
        line_lb = self._line_lb(self.combos[i])
        ub = upper_bound(objective, lam, b.r_ub, b.r_lo, b.per_rps, line_lb)
        if b.discount > 0:  # owned: the market-price bound too (whichever is lower holds)
            alt = upper_bound(
                objective, lam, b.r_ub, b.r_lo, b.market_per_rps, line_lb - b.discount
            )
            ub = min(ub, alt)
        if i in self._known:
            lam0, f0 = self._known[i]
            if eff >= lam0:
                ub = min(ub, f0 - (eff - lam0) * b.min_cost)
        return ub

    def _order(self, ubs: list[float]) -> list[int]:
        """Best bound first; the last step's winner before all (a warm incumbent)."""
        order = sorted(range(len(ubs)), key=lambda i: (-ubs[i], i))
        if self._last_best is not None:
            order.remove(self._last_best)
            order.insert(0, self._last_best)
        return order

    def solve(
        self, objective: str = "goodput", lam: float = 0.0, duals: bool = False
    ) -> SolverResult:
        """The best plan for `objective` ('goodput' or 'dinkelbach' at `lam`). Among plans
        within 1e-9 of the best, the combination with the cheapest pool wins (as enumerated)."""
        t0 = time.perf_counter()
        limit = self.pb.search.time_limit_s
        eff = milp.GOODPUT_COST_WEIGHT if objective == "goodput" else lam
        ubs = [self._ub(i, objective, lam, eff) for i in range(len(self.combos))]
        best_i, best_key, best_sol, milps = -1, -np.inf, None, 0
        for i in self._order(ubs):
            local = enumeration.one_datacenter(self.pb.sites, self.combos[i])
            if i in self._infeasible or not (self.lines or local):
                continue
            tie_ok = i < best_i and ubs[i] >= best_key - TOL
            if best_sol is not None and ubs[i] <= best_key + TOL and not tie_ok:
                self._known[i] = (eff, ubs[i])  # not solved: its bound stands for F_i
                continue
            t = self._tables_of(i)
            milps += 1
            sol = milp.solve(t, objective, lam, limit)
            if sol is None:
                self._infeasible.add(i)
                diagnosis.track_reach(self.reach, t, self.combos[i].label)
                continue
            self._known[i] = (eff, sol.objective)
            if best_sol is None or _better(sol.objective, i, best_key, best_i):
                best_i, best_key, best_sol = i, sol.objective, sol
        if best_sol is None:
            sla = self.pb.sla
            reasons = self.findings.reasons() + diagnosis.reach_reasons(
                self.reach, sla, self.spec.crosses_line
            )
            if not reasons:
                reasons.append(diagnosis.pools_reason(False))
            raise diagnosis.infeasible(self.spec.name, reasons, sla)
        self._last_best = best_i
        cb, t = self.combos[best_i], self._tables[best_i]
        best = combo_result.build(self.sh, cb, t, best_sol)
        if duals:
            best = solved.with_duals(best, objective, lam, limit)
        return solved.with_effort(best, time.perf_counter() - t0, milps)


def _better(key: float, i: int, best_key: float, best_i: int) -> bool:
    return key > best_key + TOL or (key >= best_key - TOL and i < best_i)
