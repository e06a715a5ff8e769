"""The report's inputs recap: the scenario a plan answers, one row per input, in words."""

from __future__ import annotations

from pdd_plan.inputs.schema.distribution import Distribution
from pdd_plan.inputs.schema.owned import Owned
from pdd_plan.inputs.schema.scenario import SLA, Link
from pdd_plan.outputs.plan import Plan


def dist_text(d: Distribution | dict | None, scale: float = 1.0, pct: bool = False) -> str:
    """One line for a workload distribution {fixed | lognormal | histogram}."""
    if d is None:
        return "-"
    if isinstance(d, dict):
        d = Distribution.model_validate(d)

    def num(v: float) -> str:
        return f"{v * 100:g}%" if pct else f"{v * scale:,.0f}"

    if d.fixed is not None:
        return f"fixed {num(d.fixed)}"
    if d.lognormal is not None:
        ln = d.lognormal
        return (
            f"lognormal mu={ln.mu:g} sigma={ln.sigma:g}, clipped to [{num(ln.min)}, {num(ln.max)}]"
        )
    if d.histogram:
        parts = [f"{num(lo)}-{num(hi)}: {share * 100:g}%" for lo, hi, share in d.histogram]
        return "histogram " + ", ".join(parts)
    return "-"


def _sla_text(sla: SLA) -> str:
    return f"TTFT P90 <= {sla.ttft_p90_s} s, P99 <= {sla.ttft_p99_s} s; TPOT <= {sla.tpot_ms} ms"


def _link_text(link: Link) -> str:
    cands = [c if isinstance(c, str) else c.name or f"{c.gbps}G" for c in link.candidates]
    extra = f", RTT {link.rtt_ms:g} ms" if link.rtt_ms is not None else ""
    return f"{', '.join(cands)} (up to {link.max_lines} lines{extra})"


def _owned_text(o: Owned) -> str:
    parts = [
        f"{g.count} x {g.gpu} in {g.datacenter} at ${g.cost_per_gpu_hour:g}/GPU-h" for g in o.gpus
    ]
    parts += [f"{ln.count} x {ln.sku} at ${ln.cost_per_month:g}/month" for ln in o.lines]
    return ", ".join(parts) or "nothing"


def inputs_section(plan: Plan) -> tuple[str, str, list[str], list[list[str]]]:
    """(key, title, columns, rows) of the inputs recap."""
    inp = plan.inputs
    w = inp.workload
    rows: list[list[str]] = [
        ["scenario", plan.scenario],
        ["model", plan.model],
        [
            "load",
            f"{plan.rate_rps:g} req/s" if plan.rate_rps else "highest SLA goodput per architecture",
        ],
    ]
    if w.trace:
        rows.append(["trace", str(w.trace)])
    else:
        rows += [
            ["input tokens", dist_text(w.input_tokens)],
            ["output tokens", dist_text(w.output_tokens)],
        ]
    rows.append(["prefix hit (prefill side)", dist_text(w.prefix_hit, pct=True)])
    for dc in inp.datacenters:
        gpus = ", ".join(f"{n} x {g}" for g, n in dc.gpus.items()) or "none"
        rows.append([f"datacenter {dc.name}", gpus])
    if inp.link is not None:
        rows.append(["line candidates", _link_text(inp.link)])
    if inp.owned is not None:
        rows.append(["owned", _owned_text(inp.owned)])
    pl = inp.placement.model_dump()
    if any(pl.values()):
        rows.append(["placement", ", ".join(f"{k}: {v}" for k, v in pl.items() if v)])
    rows.append(["SLA", _sla_text(plan.sla)])
    if inp.prices:
        rows.append(["prices", ", ".join(f"{g} ${p:g}/GPU-h" for g, p in inp.prices.items())])
    pol = inp.policy.model_dump(mode="json")
    rows.append(["policy", ", ".join(f"{k}={v}" for k, v in pol.items())])
    rows.append(["architectures", ", ".join(inp.architectures or plan.plans)])
    rows.append(["objective", plan.objective])
    if inp.budget_per_hour:
        rows.append(["budget", f"${inp.budget_per_hour:,.2f}/h"])
    rows.append(["prefill chunk", f"{inp.search.prefill_chunk_tokens} tokens"])
    rows.append(["seed", str(inp.seed)])
    return ("inputs", "Inputs", ["item", "value"], rows)


__all__ = ["dist_text", "inputs_section"]
