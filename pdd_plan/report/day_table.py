"""The day in tables: per architecture its fleet per period (base and elastic instances per
role), cost, line load, relay share and replay; then the day's cost split and BCR."""

from __future__ import annotations

from rich.console import Console

from pdd_plan.architectures import LINE_BASELINE, LOCAL_BASELINE, RELAY_ARCH, RELAY_PATHS, get
from pdd_plan.outputs.day_plan import DayArchitecture, DayPeriod
from pdd_plan.outputs.plan import Plan
from pdd_plan.report import layout

ROLE_SHORT = (("prefill", "P"), ("relay_decode", "R"), ("main_decode", "M"), ("decode", "D"))
LEGEND = (
    "base / +elastic: instances per role (P prefill, R relay decode, M main decode, D decode); "
    "line: its utilization; relay: share of requests relayed; sim p90: the period's replay "
    "(TTFT P90 s; * missed the SLA)."
)


def roles_of(d: DayArchitecture) -> list[tuple[str, str]]:
    have = {g.role for g in d.groups}
    return [(r, s) for r, s in ROLE_SHORT if r in have]


def clock(h: float) -> str:
    m = int(round(h * 60))
    return f"{m // 60:02d}:{m % 60:02d}"


def period_row(p: DayPeriod, roles: list[tuple[str, str]]) -> list[str]:
    base = "/".join(str(p.base_per_role.get(r, 0)) for r, _ in roles)
    extra = "/".join(str(p.elastic_per_role.get(r, 0)) for r, _ in roles)
    relay = sum(p.route_share.get(q, 0.0) for q in RELAY_PATHS)
    line = "-" if p.line_utilization is None else f"{p.line_utilization * 100:.0f}%"
    sim = "-"
    if p.replay is not None and p.replay.ttft_p90_s is not None:
        sim = f"{p.replay.ttft_p90_s:.2f}" + ("" if p.replay.sla_met else "*")
    return [
        clock(p.start_hour),
        f"{p.rate_rps:.3g}",
        base,
        extra,
        f"{p.cost_per_hour:,.0f}",
        line,
        f"{relay * 100:.0f}%",
        sim,
    ]


def render_day(plan: Plan, console: Console) -> None:
    day = plan.day
    if day is None:
        return
    for a, d in day.architectures.items():
        roles = roles_of(d)
        who = "/".join(s for _, s in roles)
        cols = ("start", "req/s", f"base {who}", "+elastic", "$/h", "line", "relay", "sim p90")
        rows = [period_row(p, roles) for p in d.periods]
        title = f"{get(a).title}: the day ({day.timezone}, SLA per {day.sla_over})"
        layout.show(console, title, cols, rows, justify=("left",) + ("right",) * 7, stack_by=None)
    console.print(LEGEND, highlight=False)
    rows = []
    for a, d in day.architectures.items():
        peak = "-" if d.peak_plan_cost_day is None else f"{d.peak_plan_cost_day:,.0f}"
        rows.append(
            [
                a,
                f"{d.cost_base:,.0f}",
                f"{d.cost_elastic:,.0f}",
                f"{d.cost_line:,.0f}",
                f"{d.cost_day:,.0f}",
                peak,
                f"{d.bcr:.1f}",
                "-" if d.sla_met is None else ("yes" if d.sla_met else "no"),
            ]
        )
    cols = ("arch", "base $", "elastic $", "line $", "day $", "peak-sized $", "BCR", "SLA")
    layout.show(
        console,
        f"the day's cost ({day.hours:.3g} h)",
        cols,
        rows,
        justify=("left",) + ("right",) * 7,
    )
    for a, d in day.architectures.items():
        if d.scale is not None:  # day_scale free: the scale the best-BCR search chose
            at_1 = "no day" if d.bcr_at_profile is None else f"{d.bcr_at_profile:.1f}"
            console.print(
                f"{a}: the day at {d.scale:.3g}x its rate profile: BCR {d.bcr:.1f} "
                f"(1x as planned: {at_1})",
                highlight=False,
            )
    g = day.bcr_gain
    relay, local, line = (get(x).title for x in (RELAY_ARCH, LOCAL_BASELINE, LINE_BASELINE))

    def pct(x: float | None) -> str:
        return "- (no plan)" if x is None else f"{x * 100:+.1f}%"

    console.print(
        f"Day BCR: {relay} vs {local} {pct(g.get(f'vs_{LOCAL_BASELINE}'))}, vs {line} "
        f"{pct(g.get(f'vs_{LINE_BASELINE}'))}. peak-sized $: the busiest period's plan for all the day's hours.",
        highlight=False,
    )
