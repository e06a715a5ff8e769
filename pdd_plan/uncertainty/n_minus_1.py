"""N-1: a plan's SLA goodput (nominal inputs) with one instance of each role lost (from the
role's largest group), and with one line of a multi-line option down."""

from __future__ import annotations

import dataclasses

from pdd_plan.architectures import ROLE_ORDER
from pdd_plan.evaluate import analytic
from pdd_plan.evaluate.fleet import FleetSpec
from pdd_plan.inputs.context import Context
from pdd_plan.optimize.caps import Caps
from pdd_plan.uncertainty import paired, perturb
from pdd_plan.workload.requests import RequestClasses


def _less(fs: FleetSpec, role: str) -> FleetSpec:
    groups = list(fs.instances)
    i = max((k for k, g in enumerate(groups) if g.role == role), key=lambda k: groups[k].count)
    g = groups[i]
    if g.count <= 1:
        del groups[i]
    else:
        per = g.cost_per_hour / g.count
        groups[i] = g.model_copy(
            update={"count": g.count - 1, "cost_per_hour": per * (g.count - 1)}
        )
    return dataclasses.replace(fs, instances=groups)


def losses(fs: FleetSpec) -> dict[str, FleetSpec]:
    """The fleet with one instance of each role it runs lost, and with one line down."""
    roles = sorted({g.role for g in fs.instances if g.count > 0}, key=ROLE_ORDER.get)  # type: ignore[arg-type]
    out: dict[str, FleetSpec] = {role: _less(fs, role) for role in roles}
    if fs.line is not None and fs.line.count > 1:
        ln = fs.line
        per = ln.cost_per_hour / ln.count
        down = ln.model_copy(update={"count": ln.count - 1, "cost_per_hour": per * (ln.count - 1)})
        out["line"] = dataclasses.replace(fs, line=down)
    return out


def n_minus_1(
    ctx: Context, classes: RequestClasses, fs: FleetSpec, caps: Caps | None = None
) -> dict[str, float]:
    """What is lost -> SLA goodput (req/s) without it, checked under `caps` (the plan's:
    block.plan_caps, the caps its replay verified; None: evaluate's)."""
    nominal = perturb.apply(paired.pb_of(ctx), classes, {})
    return {k: round(perturb.goodput(nominal, f, caps), 4) for k, f in losses(fs).items()}


def at_reach(
    ctx: Context, classes: RequestClasses, fs: FleetSpec, caps: Caps | None, n1: dict[str, float]
) -> list[str]:
    """The losses whose N-1 goodput stops at a law's reach (the prefill queue's 97%, the line's
    95%: search.prefill_utilization, search.line_utilization), not at the SLA: past the reach
    the laws are not computed, so only a replay says whether that fleet serves more."""
    nominal = perturb.apply(paired.pb_of(ctx), classes, {})
    c = caps or Caps(decode=1.0)
    out = []
    for k, f in losses(fs).items():
        g = n1.get(k, 0.0)
        fm = perturb.fleet_model(nominal, f, c)
        if g <= 0 or fm.n_prefill == 0 or not fm.md:
            continue
        reach = analytic.rate_bound(fm, c)
        free = analytic.rate_bound(fm, dataclasses.replace(c, prefill=1.0, line=1.0))
        if reach < free * (1 - 1e-9) and g >= reach * (1 - 2 * perturb.REL_TOL):
            out.append(k)
    return out
