"""The report of a plan as plain sections (title, columns, rows of strings), rendered by
``render`` (terminal table, markdown), ``html`` (one self-contained page) or dumped as JSON.

Sections: inputs recap, fleet per architecture, cost breakdown, analytic vs simulated
percentiles, routing, binding constraints and SLA checks, comparison.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

ROLE_ORDER = {"prefill": 0, "relay_decode": 1, "main_decode": 2, "decode": 3}
ROLES = tuple(ROLE_ORDER)


@dataclass
class Section:
    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class Report:
    title: str
    subtitle: str
    sections: list[Section] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def section(self, key: str) -> Section:
        return next(s for s in self.sections if s.key == key)


def _f(x, nd: int = 3, scale: float = 1.0, unit: str = "") -> str:
    if x is None:
        return "-"
    try:
        return f"{float(x) * scale:,.{nd}f}{unit}"
    except (TypeError, ValueError):
        return str(x)


def _pct(x, nd: int = 1) -> str:
    return "-" if x is None else f"{float(x) * 100:.{nd}f}%"


def _signed_pct(x) -> str:
    return "-" if x is None else f"{float(x) * 100:+.1f}%"


def dist_text(d: dict | None, scale: float = 1.0, pct: bool = False) -> str:
    """One line for a workload distribution {fixed | lognormal | histogram}."""
    if not d:
        return "-"

    def num(v: float) -> str:
        return f"{v * 100:g}%" if pct else f"{v * scale:,.0f}"

    if d.get("fixed") is not None:
        return f"fixed {num(d['fixed'])}"
    if d.get("lognormal"):
        ln = d["lognormal"]
        return (
            f"lognormal mu={ln['mu']:g} sigma={ln['sigma']:g}, clipped to "
            f"[{num(ln['min'])}, {num(ln['max'])}]"
        )
    if d.get("histogram"):
        parts = [f"{num(lo)}-{num(hi)}: {share * 100:g}%" for lo, hi, share in d["histogram"]]
        return "histogram " + ", ".join(parts)
    return "-"


def _inputs(plan: dict) -> Section:
    inp = plan.get("inputs") or {}
    w = inp.get("workload") or {}
    rows: list[list[str]] = [
        ["scenario", str(plan.get("scenario", inp.get("name", "-")))],
        ["model", str(plan.get("model", inp.get("model", "-")))],
        [
            "load",
            f"{plan['rate_rps']:g} req/s"
            if plan.get("rate_rps")
            else "highest SLA goodput per architecture",
        ],
    ]
    if w.get("trace"):
        rows.append(["trace", str(w["trace"])])
    else:
        rows += [
            ["input tokens", dist_text(w.get("input_tokens"))],
            ["output tokens", dist_text(w.get("output_tokens"))],
        ]
    rows.append(["prefix hit (prefill side)", dist_text(w.get("prefix_hit"), pct=True)])
    for dc in inp.get("datacenters") or []:
        gpus = ", ".join(f"{n} x {g}" for g, n in (dc.get("gpus") or {}).items()) or "none"
        rows.append([f"datacenter {dc.get('name')}", gpus])
    link = inp.get("link")
    if link:
        cands = [
            c if isinstance(c, str) else c.get("name") or f"{c.get('gbps')}G"
            for c in link.get("candidates", [])
        ]
        extra = f", RTT {link['rtt_ms']:g} ms" if link.get("rtt_ms") is not None else ""
        rows.append(
            ["line candidates", f"{', '.join(cands)} (up to {link.get('max_lines')} lines{extra})"]
        )
    pl = inp.get("placement") or {}
    if any(pl.values()):
        rows.append(["placement", ", ".join(f"{k}: {v}" for k, v in pl.items() if v)])
    sla = plan.get("sla") or inp.get("sla") or {}
    if sla:
        rows.append(
            [
                "SLA",
                f"TTFT P90 <= {sla.get('ttft_p90_s')} s, P99 <= {sla.get('ttft_p99_s')} s; "
                f"TPOT <= {sla.get('tpot_ms')} ms",
            ]
        )
    if inp.get("prices"):
        rows.append(["prices", ", ".join(f"{g} ${p:g}/GPU-h" for g, p in inp["prices"].items())])
    pol = inp.get("policy") or {}
    if pol:
        rows.append(["policy", ", ".join(f"{k}={v}" for k, v in pol.items())])
    rows.append(["architectures", ", ".join(inp.get("architectures") or plan.get("plans", {}))])
    rows.append(["objective", str(plan.get("objective") or inp.get("objective", "-"))])
    if inp.get("budget_per_hour"):
        rows.append(["budget", f"${inp['budget_per_hour']:,.2f}/h"])
    s = inp.get("search") or {}
    if s.get("prefill_chunk_tokens"):
        rows.append(["prefill chunk", f"{s['prefill_chunk_tokens']} tokens"])
    rows.append(["seed", str(inp.get("seed", "-"))])
    return Section("inputs", "Inputs", ["item", "value"], rows)


def _fleet(plans: dict) -> Section:
    rows = []
    for a, p in plans.items():
        for i in sorted(p.get("instances") or [], key=lambda r: ROLE_ORDER.get(r["role"], 9)):
            rows.append(
                [
                    a,
                    i["role"],
                    i["gpu"],
                    i["datacenter"],
                    str(i["count"]),
                    str(i["gpus_per_instance"]),
                    f"{i['tp']}/{i.get('dp', 1)}/{i['ep']}",
                    _f(i["cost_per_hour"], 2),
                ]
            )
        ln = p.get("line")
        if ln:
            rows.append(
                [
                    a,
                    "line",
                    f"{ln['count']} x {ln['sku']}",
                    f"{ln.get('gbps', '-')} Gb/s",
                    "",
                    "",
                    f"RTT {ln.get('rtt_ms', '-')} ms",
                    _f(ln["cost_per_hour"], 2),
                ]
            )
    cols = ["arch", "role", "GPU", "datacenter", "instances", "GPUs each", "tp/dp/ep", "$/h"]
    return Section("fleet", "Fleet per architecture", cols, rows)


def cost_breakdown(p: dict) -> dict[str, float]:
    """$/h per role and the line (zero entries left out)."""
    out: dict[str, float] = {}
    for i in p.get("instances") or []:
        out[i["role"]] = out.get(i["role"], 0.0) + float(i["cost_per_hour"])
    if p.get("line"):
        out["line"] = float(p["line"]["cost_per_hour"])
    return out


def _costs(plans: dict) -> Section:
    parts = [r for r in (*ROLES, "line") if any(r in cost_breakdown(p) for p in plans.values())]
    rows = []
    for a, p in plans.items():
        c = cost_breakdown(p)
        gpus = sum(int(i["count"]) * int(i["gpus_per_instance"]) for i in p.get("instances") or [])
        rows.append(
            [a]
            + [_f(c.get(r), 2) if r in c else "-" for r in parts]
            + [
                _f(p.get("cost_per_hour"), 2),
                str(gpus),
                _f(p.get("goodput_rps"), 2),
                _f(p.get("bcr"), 1),
            ]
        )
    cols = (
        ["arch"] + [f"{r} $/h" for r in parts] + ["total $/h", "GPUs", "goodput req/s", "BCR req/$"]
    )
    return Section(
        "costs",
        "Costs",
        cols,
        rows,
        "BCR: requests served within SLA per dollar (goodput x 3600 / cost per hour).",
    )


def _q3(d: dict | None, keys=("p50", "p90", "p99"), nd: int = 3) -> list[str]:
    d = d or {}
    return [_f(d.get(k), nd) for k in keys]


def _latency(plans: dict, sla: dict) -> Section:
    rows = []
    for a, p in plans.items():
        sim = p.get("simulated") or {}
        rows.append(
            [
                a,
                "TTFT s",
                *_q3(p.get("ttft_s")),
                *_q3(sim.get("ttft_s")),
                f"P90 {sla.get('ttft_p90_s', '-')}, P99 {sla.get('ttft_p99_s', '-')}",
            ]
        )
        rows.append(
            [
                a,
                "TPOT ms",
                *_q3(p.get("tpot_ms"), nd=1),
                *_q3(sim.get("tpot_ms"), nd=1),
                f"{sla.get('tpot_ms', '-')}",
            ]
        )
        kv = p.get("kv_transfer_s") or {}
        rows.append(
            [
                a,
                "KV transfer s (analytic: mean)",
                _f(kv.get("mean")),
                "-",
                "-",
                *_q3(sim.get("kv_transfer_s")),
                "",
            ]
        )
        ln = p.get("line") or {}
        rows.append(
            [
                a,
                "line utilization",
                _pct(ln.get("utilization")) if ln else "-",
                "-",
                "-",
                _pct(sim.get("line_utilization")) if ln else "-",
                "-",
                "-",
                "",
            ]
        )
    cols = ["arch", "metric", "analytic p50", "p90", "p99", "simulated p50", "p90", "p99", "SLA"]
    note = (
        "Analytic: the optimizer's queueing model. Simulated: the plan's replay by the "
        "discrete-event simulator (optimize's verification)."
        if any(p.get("simulated") for p in plans.values())
        else "Simulated figures are absent: the plan was made with --no-verify."
    )
    return Section("latency", "Latency: analytic vs simulated", cols, rows, note)


def _routing(plans: dict) -> Section:
    rows = []
    for a, p in plans.items():
        r = p.get("route_share") or {}
        s = (p.get("simulated") or {}).get("route_share") or {}
        ro = p.get("routing") or {}
        rows.append(
            [
                a,
                " / ".join(_pct(r.get(k)) for k in ("p_md", "p_rld_md", "p_rld")),
                " / ".join(_pct(s.get(k)) for k in ("p_md", "p_rld_md", "p_rld")) if s else "-",
                _pct(p.get("rld_token_share")),
                _pct(ro.get("relay_at_or_below_hit_rate"), 0)
                if ro.get("relay_at_or_below_hit_rate") is not None
                else "none",
                str(ro.get("singular_max_output_tokens", "-")),
                _pct(p.get("prefill_utilization")),
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


def _constraints(plans: dict, infeasible: dict) -> Section:
    rows = []
    for a, p in plans.items():
        sim = p.get("simulated") or {}
        checks = sim.get("checks") or {}
        ck = (
            ", ".join(
                f"{k} {_f(v.get('simulated'))} <= {v.get('target')}: {'ok' if v.get('ok') else 'FAIL'}"
                for k, v in checks.items()
            )
            or "-"
        )
        solver = p.get("solver") or {}
        sp = p.get("shadow_prices") or {}
        rows.append(
            [
                a,
                ", ".join(p.get("binding_constraints") or []) or "none",
                ", ".join(f"{k} {v:+,.3g}" for k, v in sp.items()) or "-",
                {True: "yes", False: "NO"}.get(sim.get("sla_met"), "-"),
                ck,
                f"{solver.get('status', '-')} ({_f(solver.get('seconds'), 2)} s, "
                f"{solver.get('milps', '-')} MILPs)",
                str(len(sim.get("rounds") or [])) if sim else "-",
            ]
        )
    for a, why in infeasible.items():
        rows.append([a, f"infeasible: {why}", "-", "-", "-", "-", "-"])
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


def _comparison(plan: dict) -> Section | None:
    c = plan.get("comparison") or {}
    if not c:
        return None
    rows = [
        ["BCR gain, PDD vs IDC-PD", _signed_pct(c.get("bcr_gain_vs_idc_pd"))],
        ["BCR gain, PDD vs CDC-PD", _signed_pct(c.get("bcr_gain_vs_cdc_pd"))],
        [
            "P90 TTFT reduction vs all P->MD on the PDD fleet",
            _signed_pct(c.get("p90_ttft_reduction_vs_cdc_pd")),
        ],
        [
            "P90 TTFT, PDD fleet with every request P->MD",
            _f(c.get("p90_ttft_same_fleet_all_p_md_s"), 3, unit=" s"),
        ],
    ]
    return Section("comparison", "Comparison", ["figure", "value"], rows)


def build_report(plan: dict) -> Report:
    plans = plan.get("plans") or {}
    sla = plan.get("sla") or (plan.get("inputs") or {}).get("sla") or {}
    rate = plan.get("rate_rps")
    rep = Report(
        title=f"{plan.get('scenario', 'plan')}: capacity plan",
        subtitle=f"model {plan.get('model', '-')}, "
        + (f"{rate:g} req/s" if rate else "highest SLA goodput")
        + f", architectures {', '.join(plans)}",
    )
    rep.sections = [
        _inputs(plan),
        _fleet(plans),
        _costs(plans),
        _latency(plans, sla),
        _routing(plans),
        _constraints(plans, plan.get("infeasible") or {}),
    ]
    cmp_ = _comparison(plan)
    if cmp_ is not None:
        rep.sections.append(cmp_)
    for a, why in (plan.get("infeasible") or {}).items():
        rep.summary.append(f"{a}: infeasible: {why}")
    if plans:
        best = max(plans, key=lambda a: plans[a].get("bcr") or 0.0)
        rep.summary.append(
            f"Best BCR: {best} at {_f(plans[best].get('bcr'), 1)} req/$ "
            f"(${_f(plans[best].get('cost_per_hour'), 2)}/h for {_f(plans[best].get('goodput_rps'), 2)} req/s)."
        )
    return rep
