"""Minimum cost at a given rate: every prefill choice at each pool size from the smallest that
carries the rate, one MILP per combination, cheapest fixed cost first; a combination whose fixed
cost plus a lower bound on the rest cannot beat the incumbent is skipped."""

from __future__ import annotations

import time

import numpy as np

from .. import pipeline
from ..architectures import Architecture
from ..resolve import Context
from ..schema.plan import Reason
from ..workload.requests import RequestClasses
from . import arch_plan, diagnosis, model, owned, tables
from .arch_plan import ArchPlan
from .caps import Caps
from .enumeration import (
    Combo,
    Shared,
    decode_lb_per_rps,
    fleet_tables,
    line_cost_lb,
    prefill_choices,
)
from .tables import LineOption


def _combos(
    ctx: Context, spec: Architecture, cls: RequestClasses, rate: float, caps: Caps, reasons: list
) -> list[Combo]:
    """Pool sizes from the smallest under the prefill cap to `max_prefill_extra` more."""
    extra = ctx.scenario.search.max_prefill_extra
    out = []
    for ch in prefill_choices(ctx, spec, cls, reasons):
        n_min = int(np.floor(rate * ch.mean_service_s / caps.prefill)) + 1
        if n_min > ch.max_n:
            reasons.append(diagnosis.prefill_gpus_reason(ctx, ch.pinst, n_min))
            continue
        for n_p in range(n_min, min(n_min + extra, ch.max_n + 1)):
            rho = rate * ch.mean_service_s / n_p
            cost = owned.pool_cost(ctx, ctx.prefill_dc, ch.pinst, n_p)
            out.append(Combo(ch.md_dc, ch.pinst, ch.service, n_p, n_p, rho, cost, ch.md, ch.rld))
    return out


def _lines(sh: Shared, rate: float) -> list[LineOption]:
    """The line options at this rate: the same for every combination."""
    if not sh.spec.crosses_line:
        return [tables.rdma_option()]
    load = rate * float(np.dot(sh.cls.weight, sh.line_bytes))
    return tables.line_options_at_load(sh.ctx, load, sh.caps.line)


def plan(
    ctx: Context,
    spec: Architecture,
    cls: RequestClasses,
    rate: float,
    caps: Caps,
    duals: bool = False,
) -> ArchPlan:
    """The cheapest plan of `spec` serving `rate` req/s; InfeasibleError with reasons if none."""
    t0 = time.perf_counter()
    sc = ctx.scenario
    reasons: list[Reason] = []
    combos = _combos(ctx, spec, cls, rate, caps, reasons)
    if not combos:
        raise diagnosis.infeasible(spec.name, reasons, sc.sla)
    sh = Shared.of(ctx, spec, cls, caps)
    lines = _lines(sh, rate)
    if not lines and not any(arch_plan.one_datacenter(ctx, cb) for cb in combos):
        # no line option carries the bytes under its cap (the same for every combination): say
        # so rather than fall through to a GPU-availability guess
        reasons.append(diagnosis.line_reason(ctx, cls, rate, caps))
        raise diagnosis.infeasible(spec.name, reasons, sc.sla)
    line_lb = line_cost_lb(ctx, spec)
    combos.sort(key=lambda c: c.fixed_cost)
    best: ArchPlan | None = None
    milps = 0
    reach: diagnosis.Reach = {}
    for cb in combos:
        local = arch_plan.one_datacenter(ctx, cb)
        cb_lines = [tables.rdma_option()] if local else lines
        if not cb_lines:
            continue
        lb_cost = (
            cb.fixed_cost
            + (0.0 if local else line_lb)
            + rate * decode_lb_per_rps(cls, cb.md + cb.rld, caps.decode, ctx)
        )
        if best is not None and lb_cost >= best.cost_per_hour * (1 - 1e-9):
            continue  # bound: cannot beat the incumbent
        chunk = sc.search.prefill_chunk_tokens
        pool = pipeline.PrefillPool.of(cb.pinst, cb.n_lo, cls, chunk, rate)
        t = fleet_tables(sh, cb, pool, cb_lines, rate)
        milps += 1
        sol = model.solve(t, "cost", 0.0, sc.search.time_limit_s)
        if sol is None:
            diagnosis.track_reach(reach, t, cb.label)
            continue
        if best is None or -sol.cost_per_hour > -best.cost_per_hour + 1e-9:
            best = arch_plan.build(ctx, spec, cls, cb, t, sol, caps)
    if best is None:
        reasons += diagnosis.reach_reasons(reach, sc.sla)
        if not reasons:
            reasons.append(diagnosis.pools_reason(True))
        raise diagnosis.infeasible(spec.name, reasons, sc.sla)
    if duals:
        arch_plan.add_duals(best, "cost", 0.0, sc.search.time_limit_s)
    best.solve_seconds = time.perf_counter() - t0
    best.milps = milps
    return best
