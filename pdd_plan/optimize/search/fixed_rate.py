"""Minimum cost at a given rate: every prefill choice at each pool size from the smallest that
carries the rate, one MILP per combination, cheapest fixed cost first; a combination whose fixed
cost plus a lower bound on the rest cannot beat the incumbent is skipped."""

from __future__ import annotations

import time

import numpy as np

from pdd_plan.architectures import Architecture
from pdd_plan.common import limits
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import diagnosis, milp, owned, solved, tables
from pdd_plan.optimize import summary as optimize_summary
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
from pdd_plan.optimize.tables import LineOption
from pdd_plan.workload.requests import RequestClasses


def _combos(
    pb: Problem,
    spec: Architecture,
    classes: RequestClasses,
    rate: float,
    caps: Caps,
    findings: diagnosis.Findings,
) -> list[Combo]:
    """Pool sizes from the smallest under the prefill cap to `max_prefill_extra` more."""
    extra = pb.search.max_prefill_extra
    out = []
    for ch in prefill_choices(pb.sites, pb.catalog, pb.sla, spec, classes, findings):
        n_min = int(np.floor(rate * ch.mean_service_s / caps.prefill)) + 1
        if n_min > ch.max_n:
            findings.too_few_gpus(ch.pinst, n_min)
            continue
        for n_p in range(n_min, min(n_min + extra, ch.max_n + 1)):
            rho = rate * ch.mean_service_s / n_p
            cost = owned.pool_cost(pb.owned, pb.sites.prefill, ch.pinst, n_p)
            out.append(Combo(ch.md_dc, ch.pinst, ch.service, n_p, n_p, rho, cost, ch.md, ch.rld))
    return out


def _lines(pb: Problem, sh: Shared, rate: float) -> list[LineOption]:
    """The line options at this rate: the same for every combination."""
    if not sh.spec.crosses_line:
        return [tables.rdma_option()]
    load = rate * float(np.dot(sh.classes.weight, sh.line_bytes))
    return tables.line_options_at_load(pb.lines, pb.max_lines, pb.owned, load, sh.caps.line)


TIE = 1e-9  # relative $/hour under which two plans cost the same


def ttft_key(p: SolverResult, classes: RequestClasses, rate: float, prefill_dc: str) -> tuple:
    """What orders two plans of one cost: the TTFT a user is shown (P90, then P99, P50)."""
    total = p.prefill_count + sum(p.solution.counts.get(o.cand.key, 0) for o in p.options)
    if total > limits.value("PLAN_INSTANCES"):
        # no plan can be written: last here, refused in one line once chosen (verify.check_size)
        return (float("inf"),) * 3
    try:
        t = optimize_summary.summarize(p, classes, rate, prefill_dc).ttft_s
    except InfeasibleError:  # no finite TTFT: last
        return (float("inf"),) * 3
    return (t.p90, t.p99, t.p50)


def better(
    best: SolverResult | None,
    new: SolverResult,
    classes: RequestClasses,
    rate: float,
    prefill_dc: str,
    key=ttft_key,
) -> SolverResult:
    """The cheaper of two plans; at the same cost (within TIE), the one with the better TTFT
    (the first found on a tie of both: the enumeration's order, deterministic)."""
    if best is None or new.cost_per_hour < best.cost_per_hour * (1 - TIE):
        return new
    if new.cost_per_hour > best.cost_per_hour * (1 + TIE):
        return best
    a, b = key(best, classes, rate, prefill_dc), key(new, classes, rate, prefill_dc)
    return new if b < a else best


def plan(
    pb: Problem,
    spec: Architecture,
    classes: RequestClasses,
    rate: float,
    caps: Caps,
    duals: bool = False,
) -> SolverResult:
    """The cheapest plan of `spec` serving `rate` req/s; InfeasibleError with reasons if none."""
    t0 = time.perf_counter()
    sla = pb.sla
    findings = diagnosis.Findings(pb.sites, pb.catalog, sla, spec, classes)
    combos = _combos(pb, spec, classes, rate, caps, findings)
    if not combos:
        raise diagnosis.no_combinations(pb.sites, sla, spec, findings.reasons())
    sh = Shared.of(pb, spec, classes, caps)
    lines = _lines(pb, sh, rate)
    if not lines and not any(enumeration.one_datacenter(pb.sites, cb) for cb in combos):
        # no line option carries the bytes under its cap (the same for every combination): say
        # so rather than fall through to a GPU-availability guess
        why = diagnosis.line_reason(
            pb.model, pb.policy, pb.lines, pb.max_lines, classes, rate, caps
        )
        raise diagnosis.infeasible(spec.name, [*findings.reasons(), why], sla)
    line_lb = line_cost_lb(pb.owned, pb.lines, spec)
    combos.sort(key=lambda c: c.fixed_cost)
    best: SolverResult | None = None
    milps = 0
    reach: diagnosis.Reach = {}
    for cb in combos:
        local = enumeration.one_datacenter(pb.sites, cb)
        cb_lines = [tables.rdma_option()] if local else lines
        if not cb_lines:
            continue
        lb_cost = (
            cb.fixed_cost
            + (0.0 if local else line_lb)
            + rate * decode_lb_per_rps(classes, cb.md + cb.rld, caps.decode, pb.owned)
        )
        if best is not None and lb_cost > best.cost_per_hour * (1 + TIE):
            continue  # bound: cannot beat the incumbent, nor tie with it
        chunk = pb.search.prefill_chunk_tokens
        pool = prefill_pool.PrefillPool.of(cb.pinst, cb.n_lo, classes, chunk, rate)
        t = fleet_tables(sh, cb, pool, cb_lines, rate)
        milps += 1
        sol = milp.solve(t, "cost", 0.0, pb.search.time_limit_s)
        if sol is None:
            diagnosis.track_reach(reach, t, cb.label)
            continue
        if best is None or sol.cost_per_hour <= best.cost_per_hour * (1 + TIE):
            best = better(best, combo_result.build(sh, cb, t, sol), classes, rate, pb.sites.prefill)
    if best is None:
        reasons = findings.reasons() + diagnosis.reach_reasons(reach, sla, spec.crosses_line)
        if not reasons:
            reasons.append(diagnosis.pools_reason(True))
        raise diagnosis.infeasible(spec.name, reasons, sla)
    if duals:
        best = solved.with_duals(best, "cost", 0.0, pb.search.time_limit_s)
    return solved.with_effort(best, time.perf_counter() - t0, milps)
