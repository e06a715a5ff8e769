"""A fleet to evaluate, as the typed groups the simulator replays: from a plan's architectures
or from a scenario's `fleet:` section, checked against the scenario (one-line errors).

Both sources end as `FleetSpec` (outputs.plan `InstanceGroup`s and a `LineChoice`), so the
analytic search and the simulator read one thing, by one code path (sim/setup.py).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pdd_plan import architectures
from pdd_plan.common import limits
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import Context
from pdd_plan.inputs.pieces import Profiles, ReplaySetup, Sites
from pdd_plan.inputs.schema.fleet import ArchitectureFleet, FleetGroup, fleet_of
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.speed import _faster, deployed, speed_of, stated  # noqa: F401 (re-exported)
from pdd_plan.latency.line.transfer import LineConfig
from pdd_plan.optimize.problem import Problem
from pdd_plan.outputs.placement import allowed_sites, check_sites
from pdd_plan.outputs.plan import ArchitecturePlan, InstanceGroup, LineChoice, Plan
from pdd_plan.perf.instance import Instance, _default_parallelism

FLEET_FIX = "see the `fleet:` format in README.md (pdd-plan evaluate)"


@dataclass(frozen=True)
class FleetSpec:
    """One architecture's fleet: the groups it runs, the line, and groups it leaves idle."""

    architecture: str
    instances: list[InstanceGroup]
    line: LineChoice | None
    unused: list[InstanceGroup]  # groups of roles this architecture does not have
    where: str  # the field the fleet came from (errors and output name it)
    speed_factor: float = 1.0  # the deployment's engine speed over the perf model's
    # one instance of an optional role the fleet runs none of, which a draw's resize may add
    # (PDD planned without relay decode: uncertainty/sizing.relay_option)
    addable: tuple[InstanceGroup, ...] = ()

    @property
    def cost_per_hour(self) -> float:
        """$/hour of what the architecture runs: its instances and its line."""
        line = self.line.cost_per_hour if self.line is not None else 0.0
        return sum(g.cost_per_hour for g in self.instances) + line


def deployed_inputs(
    pb: Problem, rs: ReplaySetup, speed_factor: float
) -> tuple[Problem, ReplaySetup]:
    """The planner's and the replay's inputs with the GPU profiles `deployed` at the fleet's
    `speed_factor` over the perf model's (1: the plan's speed, the context's: inputs/speed)."""
    prof = deployed(rs.profiles, stated(rs.profiles.gpus, speed_factor))
    if prof is rs.profiles:
        return pb, rs
    catalog = dataclasses.replace(pb.catalog, gpus=prof.gpus)
    return dataclasses.replace(pb, catalog=catalog), dataclasses.replace(rs, profiles=prof)


def instance(profiles: Profiles, file: str, g: InstanceGroup | FleetGroup, field: str) -> Instance:
    """The instance one group describes. Every fleet instance is built here, from the GPU
    `profiles` (a deployment's speed factor is in them: `deployed`); a bad size is a
    one-line error naming `field` (in `file`)."""
    gpu = profiles.gpus.get(g.gpu)
    model = profiles.model
    if gpu is None:
        raise InputError(
            file,
            f"{field}.gpu",
            f"GPU '{g.gpu}' is not in the scenario's datacenters ({', '.join(profiles.gpus)})",
            "list it under datacenters[].gpus",
        )
    n, lim = g.gpus_per_instance, profiles.engine
    try:
        if g.tp is None and g.dp is None and g.ep is None and not (g.redundant_experts or 0):
            # the optimizer's recipe for this size (MoE: EP over all GPUs, best DP-attention)
            inst = _default_parallelism(model, gpu, n, limits=lim) or _any_size(model, gpu, n, lim)
            if inst is None:
                inst = Instance(model, gpu, n, tp=n, ep=1)  # raises why it is not a size
        else:
            ep = g.ep or (n if model.ffn.moe is not None else 1)
            inst = Instance(
                model,
                gpu,
                n,
                tp=g.tp or n,
                ep=ep,
                dp=g.dp or 1,
                redundant_experts=g.redundant_experts or 0,
                limits=lim,
            )
        inst.require_fit()
    except InputError as e:
        sub = e.field if e.field in ("tp", "ep", "dp", "redundant_experts") else "gpus_per_instance"
        raise InputError(file, f"{field}.{sub}", e.problem, e.fix) from None
    return inst


def _any_size(model, gpu, n: int, limits=None) -> Instance | None:
    """The recipe for a GPU count the optimizer's power-of-two search does not try (an
    existing fleet's 12 or 24 GPUs): MoE EP over the largest divisor of n that divides the
    experts, and of the DP-attention splits dividing n whose attention TP divides the heads,
    the one that fits with the most KV room. None when no split fits."""
    if model.ffn.moe is None:
        return None
    ep = max(d for d in range(1, n + 1) if n % d == 0 and model.ffn.moe.num_experts % d == 0)
    best = None
    for dp in (d for d in range(1, n + 1) if n % d == 0):
        if model.attention.num_heads % (n // dp):
            continue
        try:
            inst = Instance(model, gpu, n, tp=n, ep=ep, dp=dp, limits=limits)
        except InputError:
            continue
        if inst.fits and (best is None or inst.kv_pool_bytes > best.kv_pool_bytes):
            best = inst
    return best


def _group(profiles: Profiles, file: str, g: FleetGroup, field: str) -> InstanceGroup:
    inst = instance(profiles, file, g, field)
    return InstanceGroup(
        role=g.role,
        gpu=g.gpu,
        datacenter=g.datacenter,
        count=g.count,
        gpus_per_instance=inst.n_gpus,
        tp=inst.tp,
        dp=inst.dp,
        ep=inst.ep,
        redundant_experts=inst.redundant_experts or None,
        cost_per_hour=round(g.count * inst.cost_per_hour, 2),
    )


def _check_site(
    dcs: Sites, file: str, g: FleetGroup, sites: dict[str, list[str]], field: str
) -> None:
    """`dcs`: the scenario's datacenters; `sites`: where each role may sit."""
    have = dcs.gpus
    if g.datacenter not in have:
        raise InputError(
            file,
            f"{field}.datacenter",
            f"unknown datacenter '{g.datacenter}' (have {', '.join(have)})",
            "use a name from datacenters[]",
        )
    if have[g.datacenter].get(g.gpu, 0) <= 0:
        listed = ", ".join(k for k, n in have[g.datacenter].items() if n > 0) or "none"
        raise InputError(
            file,
            f"{field}.gpu",
            f"datacenter '{g.datacenter}' lists no '{g.gpu}' GPUs ({listed})",
            f"add {g.gpu} to that datacenter's gpus",
        )
    if g.datacenter not in sites[g.role]:
        raise InputError(
            file,
            f"{field}.datacenter",
            f"the scenario places {g.role} in {' or '.join(sites[g.role])}, not '{g.datacenter}'",
            "move the group or set placement",
        )


def _line(
    skus: list[LineSKU], file: str, f: ArchitectureFleet, field: str
) -> tuple[list[LineSKU], LineChoice | None]:
    """The fleet's line (any bundled or link-candidate SKU: it is added to the SKUs)."""
    if f.line is None:
        return skus, None
    sku = next((s for s in skus if s.name == f.line.sku), None)
    if sku is None:
        sku = profiles.line(f.line.sku, f"{field}.line.sku", file)
        skus = [*skus, sku]
    cfg = LineConfig(sku, f.line.count)
    choice = LineChoice(
        sku=sku.name,
        gbps=sku.gbps,
        count=f.line.count,
        cost_per_hour=round(cfg.cost_per_hour, 2),
        utilization=0.0,
        rtt_ms=sku.rtt_ms,
    )
    return skus, choice


def _gpu_totals(sites: Sites, file: str, groups: list[tuple[str, InstanceGroup]]) -> None:
    have = sites.gpus
    used: dict[tuple[str, str], int] = defaultdict(int)
    where: dict[tuple[str, str], str] = {}
    for field, g in groups:
        used[(g.datacenter, g.gpu)] += g.count * g.gpus_per_instance
        where.setdefault((g.datacenter, g.gpu), field)
    for (dc, gpu), n in sorted(used.items()):
        if n > have[dc][gpu]:
            raise InputError(
                file,
                where[(dc, gpu)],
                f"the fleet uses {n} {gpu} GPUs in datacenter '{dc}', which lists {have[dc][gpu]}",
                f"raise datacenters[].gpus.{gpu} or shrink the fleet",
            )


def from_scenario(ctx: Context) -> tuple[Context, dict[str, FleetSpec]]:
    """Each listed architecture's fleet from the scenario's `fleet:` (own entry, else `all`);
    the context comes back with any SKU a fleet names added to its lines. An entry point (the
    CLI reads the fleet here): the pieces below it take what they check."""
    sc = ctx.scenario
    prof, dcs, skus = ctx.profiles, ctx.sites, ctx.lines
    if sc.fleet is None:
        raise InputError(
            ctx.file,
            "fleet",
            "no fleet to evaluate",
            "add a fleet: section, or give a plan from `pdd-plan optimize --out`",
        )
    out: dict[str, FleetSpec] = {}
    for a in sc.architectures:
        hit = fleet_of(sc.fleet, a)
        if hit is None:
            continue
        key, f = hit
        spec = architectures.get(a)
        sites = allowed_sites(dcs, a)
        mine: list[Any]
        idle: list[Any]
        mine, idle, checked = [], [], []
        for i, g in enumerate(f.instances):
            field = f"fleet.{key}.instances[{i}]"
            ig = _group(prof, ctx.file, g, field)
            if g.role in spec.roles:
                _check_site(dcs, ctx.file, g, sites, field)
                (mine if g.count > 0 else idle).append(ig)
            else:
                idle.append(ig)
            checked.append((field, ig))
        _gpu_totals(dcs, ctx.file, checked)
        skus, line = _line(skus, ctx.file, f, f"fleet.{key}")
        # the replays and the bisection work per instance and line, bounded as a plan's are
        total = sum(g.count for g in mine)
        limits.check("PLAN_INSTANCES", total, ctx.file, f"fleet.{key}.instances")
        if line is not None:
            limits.check("LINES", line.count, ctx.file, f"fleet.{key}.line.count")
        if spec.crosses_line and line is None:
            raise InputError(
                ctx.file,
                f"fleet.{key}.line",
                f"{a} sends KV across the line, and the fleet has none",
                "add line: {sku: ..., count: ...}",
            )
        out[a] = FleetSpec(
            a,
            mine,
            line if spec.crosses_line else None,
            idle,
            f"fleet.{key}",
            f.speed_factor,
        )
    if not out:
        raise InputError(
            ctx.file,
            "fleet",
            f"no fleet for any listed architecture ({', '.join(sc.architectures)})",
            "add fleet.all or an entry per architecture",
        )
    return (ctx if skus is ctx.lines else dataclasses.replace(ctx, lines=skus)), out


def from_plan(ctx: Context, plan: Plan, file: str) -> dict[str, FleetSpec]:
    """Each planned architecture's fleet and line, as the plan (possibly edited) has them.
    An entry point, as `from_scenario` is."""
    out: dict[str, FleetSpec] = {}
    prof = ctx.profiles
    for a, p in plan.plans.items():
        check_sites(plan, ctx.sites, a, file)  # sites and GPU counts the scenario allows
        for i, g in enumerate(p.instances):
            instance(prof, ctx.file, g, f"plans.{a}.instances[{i}]")  # fits the model
        if p.line is not None and not any(s.name == p.line.sku for s in ctx.lines):
            raise InputError(
                file,
                f"plans.{a}.line.sku",
                f"line '{p.line.sku}' is not among the scenario's link candidates",
                "use the plan with the scenario it was made from",
            )
    out.update(specs(plan.plans))
    return out


def specs(plans: dict[str, ArchitecturePlan]) -> dict[str, FleetSpec]:
    """Each architecture plan's fleet and line (`from_plan` without its checks: plans the
    planner has just made)."""
    out: dict[str, FleetSpec] = {}
    for a, p in plans.items():
        spec = architectures.get(a)
        used = [g for g in p.instances if g.count > 0]
        out[a] = FleetSpec(a, used, p.line if spec.crosses_line else None, [], f"plans.{a}")
    return out
