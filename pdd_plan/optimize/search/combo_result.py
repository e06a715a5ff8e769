"""The plan a combination's solution describes: the `SolverResult` the drivers return, built
from the winning combination, its tables and the MILP's solution (at the rate it serves)."""

from __future__ import annotations

import dataclasses

import numpy as np

from pdd_plan.inputs.pieces import Sites
from pdd_plan.latency.line import transfer
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import milp, owned, routed, tables
from pdd_plan.optimize.search.enumeration import Combo, Shared
from pdd_plan.optimize.solved import SolverResult


def build(
    sh: Shared,
    cb: Combo,
    t: tables.FleetTables,
    sol: milp.FleetSolution,
) -> SolverResult:
    """The plan a combination's solution describes (at the rate it serves)."""
    spec, classes, caps = sh.spec, sh.classes, sh.caps
    ln = t.lines[sol.line_index]
    n_p = sol.prefill_count if sol.prefill_count is not None else cb.n_lo
    chunk = sh.prefill_chunk_tokens
    pool = prefill_pool.PrefillPool.of(cb.pinst, n_p, classes, chunk, sol.rate_rps)
    singular = sh.policy.singular_max_output_tokens if spec.singular_on_relay else None
    has_relay = any(sol.counts.get(o.cand.key, 0) > 0 for o in cb.rld)
    flows = routed.router_flows(sol.flows, classes, sol.rate_rps, sh.policy, singular, has_relay)
    served = flows if flows is not None else sol.flows
    crosses = t.paths[sol.line_index].crosses_line
    crossing = sum(served[p] for p in served if crosses[p])
    rho_l = (
        float(np.dot(crossing, t.line_bytes) / ln.capacity_bytes_s)
        if np.isfinite(ln.capacity_bytes_s)
        else 0.0
    )
    operating = None
    if ln.config is not None and 0.0 < rho_l < ln.level * (1.0 - 1e-9):
        # the tables put the line at its level (a bound the routing must stay under); what the
        # plan reports is at the load its routing puts there (relayed requests stay off it)
        at = dataclasses.replace(ln, level=rho_l)
        cw = None if flows is None else routed.crossing_weight(flows, crosses, classes)
        operating = tables.fine_times(
            sh.policy, chunk, classes, pool, cb.service, cb.md, cb.rld, at, caps, cw
        )
    return SolverResult(
        architecture=spec.name,
        rate=sol.rate_rps,
        prefill=cb.pinst,
        prefill_count=n_p,
        pool=pool,
        line=ln.config,
        line_rho=rho_l,
        options=cb.md + cb.rld,
        solution=sol,
        times=t.paths[sol.line_index].times,
        cost_per_hour=sol.cost_per_hour,
        singular_max_output_tokens=singular,
        main_dc=cb.md_dc,
        tables=t,
        owned_split=_owned_split(sh.owned, sh.sites, cb, n_p, sol, ln.config),
        operating=operating,
        routed=flows,
    )


def _owned_split(
    prices: owned.OwnedPrices,
    sites: Sites,
    cb: Combo,
    n_p: int,
    sol: milp.FleetSolution,
    line: transfer.LineConfig | None,
) -> tuple[float, float] | None:
    """(owned, new) $/hour with an `owned:` section; None without one."""
    if not prices.declared:
        return None
    used = [(sites.prefill, cb.pinst, n_p)]
    used += [(o.cand.datacenter, o.inst, sol.counts.get(o.cand.key, 0)) for o in cb.md + cb.rld]
    return owned.split(prices, used, line)
