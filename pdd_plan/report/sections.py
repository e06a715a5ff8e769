"""The report of a plan as plain sections (title, columns, rows of strings), rendered by
``render`` (terminal table, markdown), ``html`` (one self-contained page) or dumped as JSON.

The verdict first (one sentence per baseline), then the sections: fleet per architecture, cost
breakdown, analytic vs simulated percentiles, routing, binding constraints and SLA checks,
comparison, how sure, and the inputs recap last.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pdd_plan import architectures
from pdd_plan.architectures import PATHS, ROLE_ORDER, ROLES
from pdd_plan.inputs.schema.scenario import SLA
from pdd_plan.outputs.plan import ArchitecturePlan, Infeasible, Plan, RouteShare
from pdd_plan.report import uncertainty, verdict
from pdd_plan.report.day_sections import day_sections
from pdd_plan.report.inputs_section import inputs_section


@dataclass
class Section:
    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    svg: str = ""  # an inline SVG plot the HTML page draws under the table (Markdown: none)


@dataclass
class Report:
    title: str
    subtitle: str
    sections: list[Section] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)  # the answer, first (report/verdict.py)

    def to_dict(self) -> dict:
        d = asdict(self)
        for sec in d["sections"]:  # a plot only where a section has one (the tornado)
            if not sec["svg"]:
                del sec["svg"]
        return d

    def section(self, key: str) -> Section:
        return next(s for s in self.sections if s.key == key)


def _f(x, nd: int = 3, scale: float = 1.0, unit: str = "") -> str:
    if x is None:
        return "-"
    try:
        return f"{float(x) * scale:,.{nd}f}{unit}"
    except (TypeError, ValueError):
        return str(x)


def not_met_label(why: Infeasible) -> str:
    """How an architecture without a plan is introduced: no plan found, or a plan whose
    replay missed the SLA (its figures are in the message)."""
    if why.reasons[0].kind == "replay_sla":
        return "misses the SLA in the replay"
    return "infeasible"


def _pct(x, nd: int = 1) -> str:
    return "-" if x is None else f"{float(x) * 100:.{nd}f}%"


def _signed_pct(x) -> str:
    return "-" if x is None else f"{float(x) * 100:+.1f}%"


def _fleet(plans: dict[str, ArchitecturePlan]) -> Section:
    rows = []
    for a, p in plans.items():
        for i in sorted(p.instances, key=lambda r: ROLE_ORDER.get(r.role, 9)):
            rows.append(
                [
                    a,
                    i.role,
                    i.gpu,
                    i.datacenter,
                    str(i.count),
                    str(i.gpus_per_instance),
                    f"{i.tp}/{i.dp}/{i.ep}",
                    _f(i.cost_per_hour, 2),
                ]
            )
        ln = p.line
        if ln is not None:
            rows.append(
                [
                    a,
                    "line",
                    f"{ln.count} x {ln.sku}",
                    f"{ln.gbps} Gb/s",
                    "",
                    "",
                    f"RTT {ln.rtt_ms} ms",
                    _f(ln.cost_per_hour, 2),
                ]
            )
    cols = ["arch", "role", "GPU", "datacenter", "instances", "GPUs each", "tp/dp/ep", "$/h"]
    return Section("fleet", "Fleet per architecture", cols, rows)


def cost_breakdown(p: ArchitecturePlan) -> dict[str, float]:
    """$/h per role and the line (zero entries left out)."""
    out: dict[str, float] = {}
    for i in p.instances:
        out[i.role] = out.get(i.role, 0.0) + float(i.cost_per_hour)
    if p.line is not None:
        out["line"] = float(p.line.cost_per_hour)
    return out


def _costs(plans: dict[str, ArchitecturePlan]) -> Section:
    parts = [r for r in (*ROLES, "line") if any(r in cost_breakdown(p) for p in plans.values())]
    owned = any(p.cost_owned_per_hour is not None for p in plans.values())
    rows = []
    for a, p in plans.items():
        c = cost_breakdown(p)
        gpus = sum(i.count * i.gpus_per_instance for i in p.instances)
        split = [_f(p.cost_owned_per_hour, 2), _f(p.cost_new_per_hour, 2)] if owned else []
        rows.append(
            [a]
            + [_f(c.get(r), 2) if r in c else "-" for r in parts]
            + split
            + [_f(p.cost_per_hour, 2), str(gpus), _f(p.goodput_rps, 2), _f(p.bcr, 1)]
        )
    cols = (
        ["arch"]
        + [f"{r} $/h" for r in parts]
        + (["owned $/h", "new $/h"] if owned else [])
        + ["total $/h", "GPUs", "goodput req/s", "BCR req/$"]
    )
    note = "BCR: requests served within SLA per dollar (goodput x 3600 / cost per hour)."
    if owned:
        note += (
            " Owned capacity (the scenario's owned: section): the role and line columns price "
            "the fleet at market; owned $/h is what the owned GPUs and lines the plan uses "
            "count at, new $/h what is bought on top, and total (their sum) is BCR's cost: with "
            "sunk owned capacity BCR measures the marginal spend."
        )
    return Section("costs", "Costs", cols, rows, note)


def _q3(d: object | None, keys=("p50", "p90", "p99"), nd: int = 3) -> list[str]:
    return [_f(getattr(d, k, None), nd) for k in keys]


def _latency_rows(a: str, p: ArchitecturePlan, sla: SLA) -> list[list[str]]:
    sim = p.simulated
    ln = p.line
    return [
        [
            a,
            "TTFT s",
            *_q3(p.ttft_s),
            *_q3(sim and sim.ttft_s),
            f"P90 {sla.ttft_p90_s}, P99 {sla.ttft_p99_s}",
        ],
        [a, "TPOT ms", *_q3(p.tpot_ms, nd=1), *_q3(sim and sim.tpot_ms, nd=1), f"{sla.tpot_ms}"],
        [
            a,
            "KV transfer s",
            *_q3(p.kv_transfer_s),
            *_q3(sim and sim.kv_transfer_s),
            "",
        ],
        [
            a,
            "line utilization",
            _pct(ln.utilization) if ln else "-",
            "-",
            "-",
            _pct(sim.line_utilization if sim else None) if ln else "-",
            "-",
            "-",
            "",
        ],
    ]


def _latency(plans: dict[str, ArchitecturePlan], sla: SLA) -> Section:
    rows = [r for a, p in plans.items() for r in _latency_rows(a, p, sla)]
    cols = ["arch", "metric", "analytic p50", "p90", "p99", "simulated p50", "p90", "p99", "SLA"]
    note = (
        "Analytic: the optimizer's queueing model. Simulated: the plan's replay by the "
        "discrete-event simulator (optimize's verification)." + _warmup_note(plans)
        if any(p.simulated for p in plans.values())
        else "Simulated figures are absent: the plan was made with --no-verify."
    )
    return Section("latency", "Latency: analytic vs simulated", cols, rows, note)


def _warmup_note(plans: dict[str, ArchitecturePlan]) -> str:
    """Which replayed requests the simulated figures leave out (plans that state it)."""
    cut = [
        f"{a} {p.simulated.warmup.requests:,} of {p.simulated.requests:,}"
        for a, p in plans.items()
        if p.simulated is not None and p.simulated.warmup is not None
    ]
    if not cut:
        return ""
    return (
        " Its figures leave out each replay's warm-up from empty queues (one-sided MSER-5): "
        + ", ".join(cut)
        + " requests."
    )


def _shares_text(r: RouteShare | None) -> str:
    if r is None:
        return "-"
    return " / ".join(_pct(getattr(r, k)) for k in PATHS)


def _relay_cell(below: float | None) -> str:
    """The hit rate at or below which requests relay; '-' where nothing relays (one word for
    one meaning, as the singular cap beside it: not 'none' next to 'None')."""
    return "-" if below is None else _pct(below, 0)


def _routing(plans: dict[str, ArchitecturePlan]) -> Section:
    rows = []
    for a, p in plans.items():
        ro = p.routing
        below = ro.relay_at_or_below_hit_rate
        rows.append(
            [
                a,
                _shares_text(p.route_share),
                _shares_text(p.simulated.route_share if p.simulated else None),
                _pct(p.rld_token_share),
                _relay_cell(below),
                "-"
                if ro.singular_max_output_tokens is None
                else f"{ro.singular_max_output_tokens:,}",
                _pct(p.prefill_utilization),
            ]
        )
    cols = [
        "arch",
        "paths p_md / p_rld_md / p_rld (analytic)",
        "(simulated)",
        "RLD token share",
        "relay at hit rate <=",
        "singular max output",
        "prefill utilization",
    ]
    return Section("routing", "Routing", cols, rows)


def _constraint_row(a: str, p: ArchitecturePlan) -> list[str]:
    sim = p.simulated
    checks = sim.checks if sim else {}
    ck = (
        ", ".join(
            f"{k} {_f(v.simulated)} <= {v.target}: {'ok' if v.ok else 'FAIL'}"
            for k, v in checks.items()
        )
        or "-"
    )
    sv = p.solver
    return [
        a,
        ", ".join(p.binding_constraints) or "none",
        ", ".join(f"{k} {v:+,.3g}" for k, v in p.shadow_prices.items()) or "-",
        {True: "yes", False: "NO"}.get(sim.sla_met, "-") if sim else "-",
        ck,
        f"{sv.status} ({_solver_effort(sv.seconds, sv.milps)})",
        str(len(sim.rounds)) if sim else "-",
    ]


def _solver_effort(seconds: float | None, milps: int) -> str:
    """'3 MILPs', with the seconds where the plan kept them (optimize --timings)."""
    n = f"{milps} MILP" + ("" if milps == 1 else "s")
    return n if seconds is None else f"{seconds:,.2f} s, {n}"


def _constraints(plans: dict[str, ArchitecturePlan], infeasible: dict[str, Infeasible]) -> Section:
    rows = [_constraint_row(a, p) for a, p in plans.items()]
    for a, why in infeasible.items():
        sim_met = "NO" if why.reasons[0].kind == "replay_sla" else "-"
        rows.append([a, f"{not_met_label(why)}: {why.message}", "-", sim_met, "-", "-", "-"])
    cols = [
        "arch",
        "binding constraints",
        "shadow prices ($/h per unit)",
        "SLA met (sim)",
        "checks",
        "solver",
        "rounds",
    ]
    return Section(
        "constraints",
        "Binding constraints and SLA checks",
        cols,
        rows,
        "Shadow prices: LP-relaxation duals, the $/h the optimum moves per unit a constraint is "
        "relaxed.",
    )


def _comparison(plan: Plan) -> Section:
    c = plan.comparison
    relay = architectures.get(architectures.RELAY_ARCH).title
    local = architectures.get(architectures.LOCAL_BASELINE).title
    line = architectures.get(architectures.LINE_BASELINE).title
    rows = [
        [f"BCR gain, {relay} vs {local}", _signed_pct(c.bcr_gain_vs_idc_pd)],
        [f"BCR gain, {relay} vs {line}", _signed_pct(c.bcr_gain_vs_cdc_pd)],
        [
            f"P90 TTFT reduction vs all P->MD on the {relay} fleet",
            _signed_pct(c.p90_ttft_reduction_vs_cdc_pd),
        ],
        [
            f"P90 TTFT, {relay} fleet with every request P->MD",
            _f(c.p90_ttft_same_fleet_all_p_md_s, 3, unit=" s"),
        ],
    ]
    return Section("comparison", "Comparison", ["figure", "value"], rows)


def build_report(plan: Plan) -> Report:
    plans = plan.plans
    rate = plan.rate_rps
    rep = Report(
        title=f"{plan.scenario}: capacity plan",
        subtitle=f"model {plan.model}, "
        + (f"{rate:g} req/s" if rate else "highest SLA goodput")
        + f", architectures {', '.join(plans)}",
    )
    rep.verdict = verdict.sentences(plan)
    rep.sections = [
        _fleet(plans),
        _costs(plans),
        _latency(plans, plan.sla),
        _routing(plans),
        _constraints(plans, plan.infeasible),
        _comparison(plan),
        *(Section(**x) for x in day_sections(plan)),
    ]
    if plan.uncertainty is not None:  # how sure: computed by pdd_plan/uncertainty/, shown here
        rep.sections += [Section(*x) for x in uncertainty.section_parts(plan.uncertainty)]
    rep.sections.append(Section(*inputs_section(plan)))  # what the plans answer, after them
    for a, why in plan.infeasible.items():
        rep.summary.append(f"{a}: {not_met_label(why)}: {why.message}")
    if plans:
        best = max(plans, key=lambda a: plans[a].bcr)
        b = plans[best]
        rep.summary.append(
            f"Best BCR: {best} at {_f(b.bcr, 1)} req/$ "
            f"(${_f(b.cost_per_hour, 2)}/h for {_f(b.goodput_rps, 2)} req/s)."
        )
    return rep
