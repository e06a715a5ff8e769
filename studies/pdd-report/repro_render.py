"""The study as text: the table printed beside the report, and docs/reproduction.md (written
by reproduce.py from the same figures, so the document cannot drift from the computation)."""

from __future__ import annotations

from repro_figures import LABEL, REPORT

from pdd_plan.architectures import P_RLD, P_RLD_MD

ROLE = {
    "fitted": "**fitted**",
    "predicted": "predicted",
    "not_predicted": "not a prediction (the SLA was read from it)",
}


def _pct(new: float, old: float) -> float:
    return 100.0 * (new / old - 1.0)


def fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, tuple | list):
        return f"{x[0]:g} to {x[1]:g}"
    return f"{x:.3g}"


def error(ours, ref, unit: str) -> str:
    """The error against the report: inside a range or the distance to it; for a % figure
    points, else the relative error."""
    if ours is None:
        return "no figure"
    if isinstance(ref, tuple | list):
        lo, hi = ref
        if lo <= ours <= hi:
            return "inside"
        near = lo if ours < lo else hi
        return f"{ours - near:+.3g} {'pt' if unit == '%' else unit} from the range"
    if unit == "%":
        return f"{ours - ref:+.1f} pt"
    return f"{_pct(ours, ref):+.1f}%" if ref else "-"


LINE_INPUTS = ("kv_handoff_mean_ms", "kv_handoff_max_ms")  # the line calibration's data


def rows(ours: dict, line_fitted: bool) -> list[tuple[str, str, str, str, str]]:
    """(figure, report, pdd-plan, error, what it is) per report figure."""
    out = []
    for k, r in REPORT.items():
        v = ours.get(k)
        unit = r["unit"]
        ref = r["value"]
        role = ROLE[r["role"]]
        if k in LINE_INPUTS and not line_fitted:
            role = "the line's calibration data (the line is not calibrated here)"
        out.append((LABEL[k], f"{fmt(ref)} {unit}", f"{fmt(v)} {unit}", error(v, ref, unit), role))
    return out


def table(ours: dict, line_fitted: bool) -> str:
    lines = ["| figure | report | pdd-plan | error | |", "|---|---:|---:|---:|---|"]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows(ours, line_fitted)]
    return "\n".join(lines)


def routing_table(at_load: dict, load_rps: float) -> str:
    """PDD's fleet at one load under each routing, CDC-PD and local decode beside."""
    head = [
        f"| at {load_rps:.3g} req/s | P50 TTFT | P90 TTFT | P99 TTFT | relayed | RLD tokens "
        "| RLD batch / TPOT batch | KV transfer P50 / P99 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = {
        "pdd:hit_threshold": "PDD, the report's rule (`router: hit_threshold`)",
        "pdd:plan": "PDD, the planner's routing (`router: plan`)",
        "cdc_pd": "CDC-PD (every request P -> MD)",
        "local": "CDC-PD's fleet, main decode in the prefill datacenter",
    }
    for k, name in names.items():
        s = at_load.get(k)
        if s is None:
            continue
        t, kv, r = s["ttft_s"], s["kv_transfer_s"], s["route_share"]
        relayed = (r.get(P_RLD_MD) or 0) + (r.get(P_RLD) or 0)
        rld = f"{s['rld_load']:.2f}" if s["rld_load"] is not None else "-"
        head.append(
            f"| {name} | {fmt(t['p50'])} s | {fmt(t['p90'])} s | {fmt(t['p99'])} s | "
            f"{100 * relayed:.1f}% | {s['rld_token_share_pct']:.2f}% | {rld} | "
            f"{fmt(kv['p50'])} / {fmt(kv['p99'])} s |"
        )
    return "\n".join(head)


def extend_lines(e: dict) -> list[str]:
    out = [
        f"recompute handoff, {e['batch']}-request batch (main decode at its TPOT-target batch): "
        f"the step in flight {e['step_ms']:.1f} ms, the joined pass {e['pass_ms']:.1f} ms -> "
        f"mean {e['mean_ms']:.1f} ms (report 305, {_pct(e['mean_ms'], 305):+.0f}%), max "
        f"{e['max_ms']:.1f} ms (report 321.4, {_pct(e['max_ms'], 321.4):+.0f}%), s.d. "
        f"{e['sd_ms']:.1f} ms (report 4.8, {_pct(e['sd_ms'], 4.8):+.0f}%)"
    ]
    if "kv_mean_ms" in e:
        out.append(
            f"KV handoff priced by the planner: the model's {e['kv_payload_bytes'] / 1e3:,.0f} KB "
            f"(report 4,649 KB) alone on the line, the sender's copy and a slow start after "
            f"idle included: mean {e['kv_mean_ms']:.1f} ms, P99 {e['kv_p99_ms']:.1f} ms"
        )
    if "payload" in e:
        out.append(f"the planner's payload at this load: {e['payload']} ({e['payload_why']})")
    return out


def exact_line(x: dict) -> str:
    """The report's fleet at its exact GPU counts (repro_study.EXACT)."""
    p, i = x["pdd"], x["idc_pd"]

    def gpus(d: dict) -> str:
        return " + ".join(f"{n} {g.upper()}" for g, n in d["gpus"].items())

    return (
        f"at the report's exact GPU counts (PDD {gpus(p)}: one 27-GPU prefill and one 16-GPU "
        f"relay decode; IDC-PD {gpus(i)}: 2 x 16 prefill, 2 x 28 decode; the speed factor as "
        f"fitted on the 96-GPU IDC-PD): PDD {fmt(p['goodput_rps'])} req/s, IDC-PD "
        f"{fmt(i['goodput_rps'])} req/s; goodput {fmt(x.get('goodput_gain_pct'))}%, cost "
        f"{fmt(x.get('cost_change_pct'))}%, BCR {fmt(x.get('bcr_gain_pct'))}% (report +27.8%, "
        "-3.5 to -7.1%, +32.4 to +37.5%)"
    )
