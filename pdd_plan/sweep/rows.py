"""A sweep's rows: one per point and architecture, read off the typed plan.

An architecture with no plan at a point is a row with status `infeasible` and its reason; a
point where none is feasible is such a row for every architecture, not a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pdd_plan.architectures import PATHS
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.outputs.plan import ArchitecturePlan, Infeasible, Plan

# the per-architecture figures of a row, in output order (the varied values come first)
ROW_KEYS = (
    "status",
    "cost_per_hour",
    "goodput_rps",
    "bcr",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p90_ms",
    *(f"route_{r}" for r in PATHS),
    "gpus",
    "line",
    "pareto",
    "reason",
)
SIM_ROW_KEYS = ("sim_sla_met", "sim_ttft_p90_s", "sim_ttft_p99_s")  # with verify only
# the reason column has always read "no plan meets the scenario: <the binding reason>"
NO_PLAN = "no plan meets the scenario: "


def plan_row(plan: ArchitecturePlan, verify: bool) -> dict:
    """The row of an architecture that has a plan (`pareto` is marked later, over all points)."""
    line = plan.line
    row: dict[str, Any] = {
        "status": "ok",
        "cost_per_hour": plan.cost_per_hour,
        "goodput_rps": plan.goodput_rps,
        "bcr": plan.bcr,
        "ttft_p90_s": plan.ttft_s.p90,
        "ttft_p99_s": plan.ttft_s.p99,
        "tpot_p90_ms": plan.tpot_ms.p90,
        **{f"route_{r}": getattr(plan.route_share, r) for r in PATHS},
        "gpus": sum(g.count * g.gpus_per_instance for g in plan.instances),
        "line": f"{line.count}x {line.sku}" if line else None,
        "pareto": False,
        "reason": None,
    }
    if verify:
        sim = plan.simulated
        row.update(
            {
                "sim_sla_met": sim.sla_met if sim else None,
                "sim_ttft_p90_s": sim.ttft_s.p90 if sim else None,
                "sim_ttft_p99_s": sim.ttft_s.p99 if sim else None,
            }
        )
    return row


def infeasible_row(reason: str, verify: bool) -> dict:
    """The row of an architecture with no plan: every figure None, the reason said."""
    row: dict[str, Any] = {k: None for k in ROW_KEYS}
    row.update({"status": "infeasible", "pareto": False, "reason": reason})
    if verify:
        row.update({k: None for k in SIM_ROW_KEYS})
    return row


def _reason(inf: Infeasible | None) -> str:
    return NO_PLAN + inf.message if inf is not None else "no plan"


def point_rows(plan: Plan, architectures: Sequence[str], verify: bool) -> dict[str, dict]:
    """{architecture: row} of one point's plan, in the scenario's architecture order."""
    return {
        a: plan_row(plan.plans[a], verify)
        if a in plan.plans
        else infeasible_row(_reason(plan.infeasible.get(a)), verify)
        for a in architectures
    }


def infeasible_rows(
    e: InfeasibleError, architectures: Sequence[str], verify: bool
) -> dict[str, dict]:
    """{architecture: row} of a point where no architecture has a plan."""
    by = e.by_architecture
    return {a: infeasible_row(_reason(by[a]) if a in by else str(e), verify) for a in architectures}


def columns(result: dict) -> list[str]:
    """The column order of `rows` (deterministic: point, varied keys, architecture, figures)."""
    keys = [v["key"] for v in result["vary"]]
    extra = list(SIM_ROW_KEYS) if result.get("verify") else []
    return ["point", *keys, "architecture", *ROW_KEYS[:-1], *extra, "reason"]


def rows(result: dict) -> list[dict]:
    """One flat row per (point, architecture), in point then architecture order."""
    keys = [v["key"] for v in result["vary"]]
    figures = columns(result)[len(keys) + 2 :]
    out = []
    for p in result["points"]:
        for a in result["architectures"]:
            r = p["architectures"][a]
            row = {"point": p["index"], **{k: p["values"][k] for k in keys}, "architecture": a}
            row.update({k: r.get(k) for k in figures})
            out.append(row)
    return out


__all__ = [
    "ROW_KEYS",
    "SIM_ROW_KEYS",
    "plan_row",
    "infeasible_row",
    "point_rows",
    "infeasible_rows",
    "columns",
    "rows",
]
