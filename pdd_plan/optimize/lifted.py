"""A plan to replay when the line is the problem: GPUs sized as usual, the line's cap lifted.

The planner's line-utilization cap is a planning rule, not physics. ``simulate`` on a scenario
whose line cannot carry the offered KV under that cap must still replay it: size
the GPUs as if the line had room (each transfer keeps its real per-connection rate, so transfer
times stay honest; only the pooled capacity stops binding), then put back the most line the
scenario allows, ``link.max_lines`` of the chosen SKU. The simulator then shows what that line
does: unstable, with figures over a stated window, when it is over capacity.
"""

from __future__ import annotations

import dataclasses

from pdd_plan.common.errors import InfeasibleError
from pdd_plan.inputs.context import Context
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency.line.transfer import LineConfig
from pdd_plan.optimize import optimize
from pdd_plan.outputs.plan import ArchitecturePlan, LineChoice

_ROOM = 1000.0  # the lifted line's capacity and pool, as a multiple of the real one


def _roomy(skus: list[LineSKU]) -> list[LineSKU]:
    """The candidate lines with capacity and connection pool ``_ROOM`` times larger (same
    names, prices, RTT and per-connection path model)."""
    return [
        s.model_copy(update={"gbps": s.gbps * _ROOM, "connections": int(s.connections * _ROOM)})
        for s in skus
    ]


def line_cap_lifted(ctx: Context, architecture: str) -> ArchitecturePlan:
    """``architecture``'s plan with the line cap lifted (see the module doc); InfeasibleError
    when even a roomy line leaves it without a plan (then the line was not the problem).
    A top stage, as ``optimize()`` is: it plans a changed scenario."""

    sc = ctx.scenario
    only = sc.model_copy(update={"architectures": [architecture]})
    roomy = _roomy(ctx.lines)
    plan = optimize(dataclasses.replace(ctx, lines=roomy, scenario=only), verify=False)
    p = plan.plans.get(architecture)
    if p is None:
        raise InfeasibleError(f"{architecture}: no plan even with the line cap lifted")
    if p.line is None:
        return p
    sku = next(s for s in ctx.lines if s.name == p.line.sku)
    k = sc.link.max_lines if sc.link else p.line.count
    cfg = LineConfig(sku, k)
    load = p.line.utilization * LineConfig(roomy[ctx.lines.index(sku)], p.line.count).usable_bytes_s
    line = LineChoice(
        sku=sku.name,
        gbps=cfg.gbps,
        count=k,
        cost_per_hour=round(cfg.cost_per_hour, 4),
        utilization=round(load / cfg.usable_bytes_s, 4),
        rtt_ms=sku.rtt_ms,
    )
    return p.model_copy(update={"line": line})
