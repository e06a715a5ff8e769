"""A day plan's deployment: the fleet's manifests with every group's objects (services, router
URLs) for the most instances the day runs and its replicas at the base, plus the scaling
schedule per group: a KEDA ScaledObject (`--target lws`) whose cron triggers set the replicas
of each stretch of periods above the base, started `elastic.startup_minutes` early (the plan
pays for that lead so the instances serve from the period's start), and `schedule.yaml` (the
replicas per group and period, every target).

KEDA scales a LeaderWorkerSet through its scale subresource: outside every trigger's window
the group runs `minReplicaCount` (the base); in a window, the largest `desiredReplicas` of the
windows open. Scale-down follows the schedule at once (no stabilization window): a removed
instance drains through its pods' termination grace period.
"""

from __future__ import annotations

import math

import yaml

from pdd_plan.emit.k8s import labels, obj_name
from pdd_plan.emit.plan import Deployment, Group, dns
from pdd_plan.inputs.schema.day_plan import DayArchitecture, DayGroup, DayPlan
from pdd_plan.inputs.schema.plan import InstanceGroup, Plan

KEDA_API = "keda.sh/v1alpha1"
LWS_API = "leaderworkerset.x-k8s.io/v1"
MINUTES_PER_DAY = 1440


def _key(g) -> tuple:
    return (g.role, g.gpu, g.datacenter, g.gpus_per_instance, g.tp, g.dp, g.ep)


def peak_plan(plan: Plan, architecture: str) -> Plan:
    """The plan with architecture's instances at the most the day runs of each group (so every
    instance the schedule may start has its objects); unchanged without a day."""
    if plan.day is None or architecture not in plan.day.architectures:
        return plan
    d = plan.day.architectures[architecture]
    p = plan.plans[architecture]
    have = {_key(g): g for g in p.instances}
    inst = []
    for g in d.groups:
        old = have.get(_key(g))
        n = max(g.per_period)
        unit = old.cost_per_hour / old.count if old is not None and old.count else 0.0
        inst.append(
            InstanceGroup(
                role=g.role,
                gpu=g.gpu,
                datacenter=g.datacenter,
                count=n,
                gpus_per_instance=g.gpus_per_instance,
                tp=g.tp,
                dp=g.dp,
                ep=g.ep,
                redundant_experts=old.redundant_experts if old is not None else None,
                cost_per_hour=round(unit * n, 2),
            )
        )
    plans = {**plan.plans, architecture: p.model_copy(update={"instances": inst})}
    return plan.model_copy(update={"plans": plans})


def _day_group(d: DayArchitecture, g: Group) -> DayGroup | None:
    return next((x for x in d.groups if _key(x) == _key(g)), None)


def cron_at(minute: int) -> str:
    m = minute % MINUTES_PER_DAY
    return f"{m % 60} {m // 60} * * *"


def windows(day: DayPlan, d: DayArchitecture, g: DayGroup) -> list[tuple[int, int, int]]:
    """(start minute, end minute, replicas) of each stretch of periods above the base, the
    start `startup_minutes` early (rounded up: cron has whole minutes, and an instance started
    late would miss its period's start); minutes of the local day, a window may wrap past
    midnight."""
    lead = math.ceil((day.startup_minutes or 0.0) - 1e-9)
    out: list[tuple[int, int, int]] = []
    for p, n in zip(d.periods, g.per_period):
        if n <= g.base:
            continue
        s = int(round(p.start_hour * 60))
        e = s + int(round(p.hours * 60))
        if out and out[-1][2] == n and out[-1][1] == s:
            out[-1] = (out[-1][0], e, n)
        else:
            out.append((s - lead, e, n))
    if (
        len(out) > 1
        and out[0][2] == out[-1][2]
        and out[-1][1] % MINUTES_PER_DAY == (out[0][0] + lead) % MINUTES_PER_DAY
    ):
        first = out.pop(0)  # a stretch over midnight: one window
        out[-1] = (out[-1][0], first[1] + MINUTES_PER_DAY, first[2])
    return [w for x in out for w in _split(x)]


def _split(w: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """A window of a whole day or more has equal start and end: two halves instead."""
    s, e, n = w
    if e - s < MINUTES_PER_DAY:
        return [w]
    mid = s + MINUTES_PER_DAY // 2
    return [(s, mid, n), (mid, s + MINUTES_PER_DAY, n)]


def scaled_object(dep: Deployment, day: DayPlan, d: DayArchitecture, g: Group) -> dict | None:
    dg = _day_group(d, g)
    if dg is None or max(dg.per_period) <= dg.base:
        return None
    triggers = [
        {
            "type": "cron",
            "metadata": {
                "timezone": day.timezone,
                "start": cron_at(s),
                "end": cron_at(e),
                "desiredReplicas": str(n),
            },
        }
        for s, e, n in windows(day, d, dg)
    ]
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": obj_name(dep, g), "labels": labels(dep, g)},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": LWS_API,
                "kind": "LeaderWorkerSet",
                "name": obj_name(dep, g),
            },
            "minReplicaCount": dg.base,
            "maxReplicaCount": max(dg.per_period),
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}
                }
            },
            "triggers": triggers,
        },
    }


def schedule_yaml(dep: Deployment, day: DayPlan, d: DayArchitecture) -> str:
    groups = []
    for g in dep.groups:
        dg = _day_group(d, g)
        if dg is None:
            continue
        groups.append(
            {
                "group": obj_name(dep, g),
                "role": g.role,
                "datacenter": g.datacenter,
                "gpu": g.gpu,
                "gpus_per_instance": g.gpus_per_instance,
                "base": dg.base,
                "replicas": [
                    {
                        "start": f"{int(p.start_hour):02d}:{int(round(p.start_hour * 60)) % 60:02d}",
                        "hours": p.hours,
                        "replicas": n,
                    }
                    for p, n in zip(d.periods, dg.per_period)
                ],
            }
        )
    head = (
        f"# Generated by `pdd-plan emit`: the day's replicas per group and period "
        f"({day.timezone}); elastic instances start {day.startup_minutes or 0:g} min early.\n"
    )
    return head + yaml.safe_dump(
        {"timezone": day.timezone, "startup_minutes": day.startup_minutes, "groups": groups},
        sort_keys=False,
    )


def at_base(docs: list[dict], base: dict[str, int]) -> list[dict]:
    """LeaderWorkerSets at their base replicas (KEDA scales them from there)."""
    for doc in docs:
        name = (doc.get("metadata") or {}).get("name")
        if doc.get("kind") == "LeaderWorkerSet" and name in base:
            doc["spec"]["replicas"] = base[name]
    return docs


def base_of(dep: Deployment, d: DayArchitecture) -> dict[str, int]:
    out = {}
    for g in dep.groups:
        dg = _day_group(d, g)
        if dg is not None:
            out[obj_name(dep, g)] = dg.base
    return out


def scaling_file(dc: str) -> str:
    return f"scaling-{dns(dc)}.yaml"


def readme_note(target: str, day: DayPlan) -> str:
    """The emitted README's paragraph on the day's schedule."""
    lead = f"{day.startup_minutes or 0:g}"
    how = (
        "`scaling-<datacenter>.yaml` holds a KEDA ScaledObject per scaled group: apply it after "
        "the LeaderWorkerSets (KEDA 2.x with its cron scaler). Each group starts at its base "
        "replicas; each cron window sets the replicas of a stretch of periods above it, opening "
        f"{lead} min early so new instances serve from the period's start."
        if target == "lws"
        else "This target has no autoscaler objects: the files run the day's most instances; "
        "scale each group to the replicas `schedule.yaml` gives per period (or use --target lws "
        "for KEDA ScaledObjects)."
    )
    return (
        f"\n## The day's schedule\n\nThe plan is a day of periods ({day.timezone}): a base "
        f"fleet paid every hour and elastic instances per period. `schedule.yaml` lists each "
        f"group's replicas per period. {how} The router lists every instance the day may run: "
        "check how your router version treats a listed worker that is not up (it may wait for "
        "it at start-up, or drop it from rotation until its health check passes).\n"
    )
