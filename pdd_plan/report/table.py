"""Rich tables for people: the plan per architecture, its fleet, and the comparison."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..architectures import LINE_BASELINE, LOCAL_BASELINE, PATHS, RELAY_ARCH, ROLE_ORDER, get
from ..schema.plan import ArchitecturePlan, Plan


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _sim(p: ArchitecturePlan) -> str:
    """Simulated TTFT P90/P99 beside the analytic ones; '-' when the plan was not verified."""
    s = p.simulated
    if s is None:
        return "-"
    ok = "" if s.sla_met else " (miss)"
    return f"{s.ttft_s.p90:.2f}/{s.ttft_s.p99:.2f}{ok}"


def _fleet(plan: Plan) -> Table:
    rate = plan.rate_rps
    load = f"{rate:g} req/s" if rate else "highest goodput"
    fleet = Table(title=f"{plan.scenario} ({plan.model}, {load}): fleet")
    for col in ("arch", "role", "instances", "GPU", "DC", "$/h"):
        fleet.add_column(col)
    for a, p in plan.plans.items():
        for i in sorted(p.instances, key=lambda i: ROLE_ORDER.get(i.role, 9)):
            size = f"{i.count} x {i.gpus_per_instance} GPUs"
            fleet.add_row(a, i.role, size, i.gpu, i.datacenter, f"{i.cost_per_hour:,.1f}")
        ln = p.line
        if ln is not None:
            fleet.add_row(
                a,
                "line",
                f"{ln.count} x {ln.sku}",
                f"{ln.utilization * 100:.0f}% used",
                "",
                f"{ln.cost_per_hour:,.1f}",
            )
    return fleet


def render_plan(plan: Plan, console: Console) -> None:
    console.print(_fleet(plan))
    t = Table(title="plans")
    for col in (
        "arch",
        "$/h",
        "req/s",
        "BCR req/$",
        "TTFT p50/p90/p99 s",
        "sim p90/p99 s",
        "TPOT p50 ms",
        "p_md/rld_md/rld",
        "RLD tok",
    ):
        t.add_column(col)
    for a, p in plan.plans.items():
        tt, r = p.ttft_s, p.route_share
        t.add_row(
            a,
            f"{p.cost_per_hour:,.1f}",
            f"{p.goodput_rps:g}",
            f"{p.bcr:.1f}",
            f"{tt.p50:.2f}/{tt.p90:.2f}/{tt.p99:.2f}",
            _sim(p),
            f"{p.tpot_ms.p50:.1f}",
            "/".join(f"{getattr(r, k):.2f}" for k in PATHS),
            f"{p.rld_token_share * 100:.1f}%",
        )
    console.print(t)
    c = plan.comparison
    relay, local, line = (get(x).title for x in (RELAY_ARCH, LOCAL_BASELINE, LINE_BASELINE))
    console.print(
        f"BCR: {relay} vs {local} {_pct(c.bcr_gain_vs_idc_pd)}, vs {line} {_pct(c.bcr_gain_vs_cdc_pd)}. "
        f"P90 TTFT on the {relay} fleet, relay vs all P->MD: {_pct(c.p90_ttft_reduction_vs_cdc_pd)} reduction."
    )
