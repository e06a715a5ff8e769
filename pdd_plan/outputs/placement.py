"""Whether a plan's fleet stands where its scenario lets it: each instance group in a
datacenter that lists its GPU type, its role in the datacenter the scenario places that role
in (the optimizer's own rule), and no more GPUs of a type used than the datacenter has.

The plan schema already refuses datacenter names the scenario lacks; this catches the rest of a
plan that does not belong to its scenario (a hand edit, or plans and scenarios mixed up), which
`simulate` would otherwise replay and `emit` deploy as if it did: the simulator places roles by
architecture, not by the plan's datacenter fields.
"""

from __future__ import annotations

from collections import defaultdict

from pdd_plan import architectures
from pdd_plan.common.errors import InputError
from pdd_plan.inputs.pieces import Sites
from pdd_plan.outputs.plan import PLAN_FIX, Plan


def allowed_sites(sites: Sites, architecture: str) -> dict[str, list[str]]:
    """Datacenters each role of `architecture` may use under the scenario's placement."""
    spec = architectures.get(architecture)
    out = {"prefill": [sites.prefill], spec.decode_role: sites.main_dcs(spec)}
    if spec.relays:
        out["relay_decode"] = [sites.relay]
    return out


def check_sites(plan: Plan, sites: Sites, architecture: str, file: str | None = None) -> None:
    """A one-line InputError naming the first instance group that does not fit the scenario
    (`plans.<architecture>.instances[i]`); nothing when the fleet fits."""
    have = {d.name: d.gpus for d in plan.inputs.datacenters}
    allowed = allowed_sites(sites, architecture)
    used: dict[tuple[str, str], int] = defaultdict(int)
    for i, g in enumerate(plan.arch(architecture, file).instances):
        if g.count == 0:
            continue
        where = f"plans.{architecture}.instances[{i}]"
        gpus = have[g.datacenter]  # the schema checked the name
        if gpus.get(g.gpu, 0) <= 0:
            listed = ", ".join(k for k, n in gpus.items() if n > 0) or "none"
            raise InputError(
                file,
                f"{where}.gpu",
                f"datacenter '{g.datacenter}' has no '{g.gpu}' GPUs in the scenario ({listed})",
                PLAN_FIX,
            )
        if g.role not in allowed:
            raise InputError(
                file, f"{where}.role", f"{architecture} has no '{g.role}' role", PLAN_FIX
            )
        if g.datacenter not in allowed[g.role]:
            raise InputError(
                file,
                f"{where}.datacenter",
                f"the scenario places {architecture}'s {g.role} in "
                f"{' or '.join(allowed[g.role])}, not '{g.datacenter}'",
                PLAN_FIX,
            )
        used[(g.datacenter, g.gpu)] += g.count * g.gpus_per_instance
    for (dc, gpu), n in sorted(used.items()):
        if n > have[dc][gpu]:
            raise InputError(
                file,
                f"plans.{architecture}.instances",
                f"uses {n} {gpu} GPUs in datacenter '{dc}', which has {have[dc][gpu]}",
                PLAN_FIX,
            )
