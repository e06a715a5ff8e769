"""The day's report sections (Markdown, HTML, JSON): the cost split and day BCR per
architecture, and each architecture's fleet per period, from the plan's `day` block."""

from __future__ import annotations

from pdd_plan.outputs.plan import Plan
from pdd_plan.report.day_table import period_row, roles_of


def day_sections(plan: Plan) -> list[dict]:
    """Each section as the fields of `sections.Section` (which builds them)."""
    day = plan.day
    if day is None:
        return []
    cost_rows = [
        [
            a,
            f"{d.cost_base:,.0f}",
            f"{d.cost_elastic:,.0f}",
            f"{d.cost_line:,.0f}",
            f"{d.cost_day:,.0f}",
            "-" if d.peak_plan_cost_day is None else f"{d.peak_plan_cost_day:,.0f}",
            f"{d.bcr:.1f}",
            "-" if d.sla_met is None else ("yes" if d.sla_met else "no"),
        ]
        for a, d in day.architectures.items()
    ]
    gains = ", ".join(
        f"{k.replace('_', ' ', 1)} {v * 100:+.1f}%"
        for k, v in day.bcr_gain.items()
        if v is not None
    )
    out = [
        dict(
            key="day",
            title=f"The day ({day.hours:.3g} h, {day.timezone})",
            columns=[
                "arch",
                "base $",
                "elastic $",
                "line $",
                "day $",
                "peak-sized $",
                "day BCR",
                "SLA",
            ],
            rows=cost_rows,
            note=f"$ per day: the base paid every hour, elastic instances per period (their runs' "
            f"start-up, drain and billing included), the line. peak-sized: the busiest period's "
            f"plan for every hour. SLA per {day.sla_over}, from the replay of each period. "
            f"PDD's day BCR {gains or '-'}.",
        )
    ]
    for a, d in day.architectures.items():
        roles = roles_of(d)
        who = "/".join(s for _, s in roles)
        out.append(
            dict(
                key=f"day_{a}",
                title=f"{a}: the fleet per period",
                columns=[
                    "start",
                    "req/s",
                    f"base {who}",
                    "+elastic",
                    "$/h",
                    "line",
                    "relay",
                    "sim p90 s",
                ],
                rows=[period_row(p, roles) for p in d.periods],
            )
        )
    return out
