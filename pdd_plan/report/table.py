"""Rich tables for people: the plan per architecture, its fleet, and the comparison."""

from __future__ import annotations

from rich.console import Console

from pdd_plan.architectures import LINE_BASELINE, LOCAL_BASELINE, PATHS, RELAY_ARCH, ROLE_ORDER, get
from pdd_plan.outputs.plan import ArchitecturePlan, Plan
from pdd_plan.report import layout, uncertainty
from pdd_plan.report.day_table import render_day
from pdd_plan.report.sections import not_met_label


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _fleet(plan: Plan, console: Console) -> None:
    rate = plan.rate_rps
    load = f"{rate:g} req/s" if rate else "highest goodput"
    rows = []
    for a, p in plan.plans.items():
        for i in sorted(p.instances, key=lambda i: ROLE_ORDER.get(i.role, 9)):
            size = f"{i.count} x {i.gpus_per_instance} GPUs"
            rows.append([a, i.role, size, i.gpu, i.datacenter, f"{i.cost_per_hour:,.1f}"])
        ln = p.line
        if ln is not None:
            rows.append(
                [
                    a,
                    "line",
                    f"{ln.count} x {ln.sku}",
                    f"{ln.utilization * 100:.0f}% used",
                    "",
                    f"{ln.cost_per_hour:,.1f}",
                ]
            )
    cols = ("arch", "role", "instances", "GPU", "DC", "$/h")
    title = f"{plan.scenario} ({plan.model}, {load}): fleet"
    layout.show(console, title, cols, rows, justify=("left",) * 5 + ("right",))


# metric x architecture: one short row per figure, so three or four architectures fit in 60
# columns and no header needs units squeezed into it
METRICS = (
    "$/h",
    "goodput req/s",
    "BCR req/$",
    "TTFT p50 s",
    "TTFT p90 s",
    "TTFT p99 s",
    "sim TTFT p90 s",
    "sim TTFT p99 s",
    "TPOT p50 ms",
    *(f"on {k}" for k in PATHS),
    "RLD tokens",
)
LEGEND = (
    "sim: the plan replayed in the simulator (- : not verified). "
    "on <path>: share of requests routed P->MD, P->RLD->MD, P->RLD."
)


OWNED_LEGEND = (
    " owned $/h: the owned capacity the plan uses, at its owned price; new $/h: what is "
    "bought on top. BCR divides by their sum."
)


def legend(plan: Plan) -> str:
    """LEGEND, with the replay length each verified plan's figures are over (and where a
    replay stopped early, its verdicts settled: ``sim.sequential``)."""
    sims = {a: p.simulated for a, p in plan.plans.items() if p.simulated is not None}
    if not sims:
        return LEGEND
    by_text: dict[str, list[str]] = {}
    for a, s in sims.items():
        e = s.early_stop
        text = (
            f"{s.requests:,} requests"
            if e is None
            else f"{e.replayed:,} of {e.full_length:,} requests replayed (stopped with every "
            f"verdict settled at {e.confidence:.0%}), figures over the {s.requests:,} finished "
            "by then"
        )
        if s.tails:  # the TTFT figures compose a long replay of the prefill stage (sim.tails)
            text += f", TTFT with its prefill stage over {s.tails['prefill_stage_requests']:,}"
        shown = [u.split(".")[1].upper() for u in s.unsettled or [] if u.startswith("ttft_s.")]
        shown = [u for u in shown if u != "P50"]
        if shown:  # the printed tails whose 95% interval is wider than +-5%
            text += f" (TTFT {'/'.join(shown)} not settled within +-5%)"
        by_text.setdefault(text, []).append(a)
    parts = [f"{', '.join(a)} {t}" for t, a in by_text.items()]
    notes = "".join(f" {a}: {s.note}." for a, s in sims.items() if s.note)
    return (
        LEGEND.replace("(- : not verified).", f"(- : not verified): {'; '.join(parts)}.", 1) + notes
    )


def _sim_cell(p: ArchitecturePlan, q: str) -> str:
    s = p.simulated
    if s is None:
        return "-"
    miss = "" if s.sla_met else " (miss)"  # v1 plans could keep a plan that missed
    return f"{getattr(s.ttft_s, q):.2f}{miss}"


# with an `owned:` section, after "$/h": what the owned capacity used counts at, and new spend
OWNED_METRICS = ("owned $/h", "new $/h")


def has_owned(plan: Plan) -> bool:
    return any(p.cost_owned_per_hour is not None for p in plan.plans.values())


def metrics(owned: bool) -> tuple[str, ...]:
    return (METRICS[0], *OWNED_METRICS, *METRICS[1:]) if owned else METRICS


def plan_column(p: ArchitecturePlan, owned: bool = False) -> list[str]:
    """One architecture's figures, in `metrics(owned)` order."""
    tt, r = p.ttft_s, p.route_share
    split = [_money(p.cost_owned_per_hour), _money(p.cost_new_per_hour)] if owned else []
    return [
        f"{p.cost_per_hour:,.1f}",
        *split,
        f"{p.goodput_rps:g}",
        f"{p.bcr:.1f}",
        f"{tt.p50:.2f}",
        f"{tt.p90:.2f}",
        f"{tt.p99:.2f}",
        _sim_cell(p, "p90"),
        _sim_cell(p, "p99"),
        f"{p.tpot_ms.p50:.1f}",
        *(f"{getattr(r, k) * 100:.1f}%" for k in PATHS),
        f"{p.rld_token_share * 100:.1f}%",
    ]


def _money(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _plans(plan: Plan, console: Console) -> None:
    owned = has_owned(plan)
    cols = {a: plan_column(p, owned) for a, p in plan.plans.items()}
    names = metrics(owned)
    rows = [[m, *(c[i] for c in cols.values())] for i, m in enumerate(names)]
    just = ("left",) + ("right",) * len(cols)
    t = layout.make("plans", ["", *cols], rows, just, width=console.width)
    if t is not None:
        console.print(t)
        console.print(legend(plan) + (OWNED_LEGEND if owned else ""), highlight=False)
    else:  # many architectures on a narrow console: one small table each
        per_arch = [[a, *c] for a, c in cols.items()]
        layout.show(
            console, "plans", ["arch", *names], per_arch, legend=legend(plan), stack_by=None
        )


def render_plan(plan: Plan, console: Console) -> None:
    """The fleet, the plans (metric x architecture), the comparison, and the architectures
    that do not meet the scenario (infeasible, or missing the SLA in the replay)."""
    _fleet(plan, console)
    _plans(plan, console)
    c = plan.comparison
    relay, local, line = (get(x).title for x in (RELAY_ARCH, LOCAL_BASELINE, LINE_BASELINE))

    def gain(x: float | None, base: str) -> str:
        return "- (no plan)" if base not in plan.plans else _pct(x)

    console.print(
        "BCR at the planned rate (each side's cheapest fleet meeting the SLA): "
        f"{relay} vs {local} {gain(c.bcr_gain_vs_idc_pd, LOCAL_BASELINE)}, "
        f"vs {line} {gain(c.bcr_gain_vs_cdc_pd, LINE_BASELINE)}. "
        + (
            f"P90 TTFT on the {relay} fleet, relay vs all P->MD: "
            f"{_pct(c.p90_ttft_reduction_vs_cdc_pd)} reduction."
            if RELAY_ARCH not in plan.plans or plan.plans[RELAY_ARCH].groups("relay_decode")
            else f"{relay} plans no relay decode: every request goes P->MD, as {line} routes."
        )
    )
    for a, why in plan.infeasible.items():
        console.print(f"[yellow]{a}: {not_met_label(why)}[/yellow]: {why.message}")
    render_day(plan, console)
    if plan.uncertainty is not None:
        uncertainty.render(plan.uncertainty, console)
