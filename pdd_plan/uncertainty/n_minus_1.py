"""N-1: a plan's SLA goodput (nominal inputs) with one instance of each role lost (from the
role's largest group), and with one line of a multi-line option down."""

from __future__ import annotations

import dataclasses

from pdd_plan.architectures import ROLE_ORDER
from pdd_plan.evaluate.fleet import FleetSpec
from pdd_plan.inputs.context import Context
from pdd_plan.optimize.search.caps import Caps
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
