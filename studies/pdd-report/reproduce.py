"""The PDD report's experiment, reproduced: every prediction beside the report's figure.

    python studies/pdd-report/reproduce.py [--requests N] [--json FILE] [--doc FILE]

Two numbers are fitted, nothing else: the engine's speed factor on IDC-PD's goodput (the file's
`speed_factor`, by calibrate_speed.py) and the line, by `pdd-plan line calibrate --transfers`
on the report's handoff microbenchmark (line_step.py). Then `pdd-plan evaluate` runs on
pdd-report.yaml (the same call, requests and seed as the CLI), and the report's fleets are
replayed at one load (PDD's SLA goodput: the report compares TTFT at one load): PDD under the
report's routing and the planner's, CDC-PD, and CDC-PD with main decode in the prefill
datacenter. `--doc` writes docs/reproduction.md from the same figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the study's sibling modules, run as a script or loaded by path

import repro_doc as doc  # noqa: E402
import repro_line_step as line_step  # noqa: E402
import repro_render as render  # noqa: E402
import repro_study as study_mod  # noqa: E402
from repro_figures import REPORT  # noqa: E402

from pdd_plan.common.atomic import write_atomic  # noqa: E402

SCENARIO = HERE / "pdd-report.yaml"
DOC = HERE.parents[1] / "docs" / "reproduction.md"
FIGURES = HERE / "reproduction.json"  # the figures docs/reproduction.md is written from
# the pdd_plan keys `--json` has always had, and what it adds
KEYS = (
    "ttft_p90_change_pct",
    "ttft_p99_change_pct",
    "rld_token_share_pct",
    "bcr_gain_pct",
    "goodput_gain_pct",
    "cost_change_pct",
    "kv_transfer_p50_s",
    "kv_transfer_p99_s",
    "cdc_ttft_p50_s",
)


def _round(x):
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    return x


def study(path: Path = SCENARIO, requests: int = 5000, fit_line: bool = True) -> dict:
    """Both calibrations, then every figure; the 100 Gb/s line's headline beside.
    `fit_line` False: the file's own line as it is (a study of another line)."""
    with tempfile.TemporaryDirectory() as tmp:
        ln = line_step.calibrate(Path(tmp)) if fit_line else line_step.as_is()
        s = study_mod.run(path, requests, ln.profile)
        exact = study_mod.exact_counts(path, requests, ln.profile)
        beside = None
        if ln.beside is not None:
            b = study_mod.run(path, requests, ln.beside)
            beside = b.get("headline")
    h = s.get("headline") or {}
    ours = {k: h.get(k) for k in REPORT if k in h}
    e = s.get("extend") or {}
    ours.update(
        {
            "extend_mean_ms": e.get("mean_ms"),
            "extend_max_ms": e.get("max_ms"),
            "extend_sd_ms": e.get("sd_ms"),
            "kv_handoff_mean_ms": None if ln.fit_mean_s is None else 1e3 * ln.fit_mean_s,
            "kv_handoff_max_ms": None if ln.fit_worst_s is None else 1e3 * ln.fit_worst_s,
        }
    )
    pdd_plan = {k: h.get(k) for k in KEYS}
    pdd_plan["extend_ms"] = e.get("mean_ms")
    ev = s["evaluate"]
    archs = {}
    for a in study_mod.ARCHS:
        r = ev["architectures"].get(a)
        at = s["at_load"].get(a)  # PDD and CDC-PD are replayed at the compared load
        archs[a] = {
            "infeasible": r is None,
            "goodput_rps": r["goodput_rps"] if r else None,
            "reasons": ev["infeasible"].get(a, {}).get("reasons"),
            "ttft_s_at_compared_load": at["ttft_s"] if at else None,
        }
    out = _round(
        {
            "scenario": Path(path).name,  # not the checkout's absolute path: the same everywhere
            "speed_factor": s.get("speed_factor"),
            "report": {k: v["value"] for k, v in REPORT.items()},
            "ours": ours,
            "pdd_plan": pdd_plan,
            "architectures": archs,
            "compared_load_rps": s.get("load_rps"),
            "at_load": s.get("at_load"),
            "extend": e,
            "line_100g_beside": beside,
            "exact_counts": exact,
            "bcr_gain_pct_at_report_gpu_counts": h.get("bcr_gain_pct_at_report_gpu_counts"),
            "evaluate": ev,
        }
    )
    out["line"] = {"message": ln.message, "profile": ln.fitted}  # the profile as written
    return out


def slim(s: dict) -> dict:
    """The figures the document is written from (`evaluate`'s replays and fleets left out):
    stored beside the document, so a test can tell a hand edit of either from the other."""
    ev = s["evaluate"]
    keep = {
        "sim_requests": ev["sim_requests"],
        "seed": ev["seed"],
        "infeasible": ev["infeasible"],
        "architectures": {
            a: {"goodput_rps": r["goodput_rps"], "gives_out_first": r["gives_out_first"]}
            for a, r in ev["architectures"].items()
        },
    }
    return {**s, "evaluate": keep}


def printout(s: dict) -> str:
    out = [
        f"speed_factor (fitted on IDC-PD's goodput alone): {s['speed_factor']}",
        f"line: {s['line']['message']}",
    ]
    for a, r in s["architectures"].items():
        if r["infeasible"]:
            why = "; ".join(x["message"] for x in r["reasons"] or [])
            t = r["ttft_s_at_compared_load"]
            at = f"; at the compared load P90 {fmt(t['p90'])} s, P99 {fmt(t['p99'])} s" if t else ""
            out.append(f"{a}: no SLA goodput ({why}){at}")
    out.append(render.table(s["ours"], bool(s["line"]["profile"])))
    if s["at_load"]:
        out.append(render.routing_table(s["at_load"], s["compared_load_rps"]))
    if s["extend"]:
        out += render.extend_lines(s["extend"])
    out.append(render.exact_line(s["exact_counts"]))
    if s["line_100g_beside"]:
        b = s["line_100g_beside"]
        out.append(
            "beside, the same calibrated line at 100 Gb/s (not chosen by the result): "
            f"P90 {fmt(b['ttft_p90_change_pct'])}%, P99 {fmt(b['ttft_p99_change_pct'])}%, "
            f"RLD tokens {fmt(b['rld_token_share_pct'])}%, goodput {fmt(b['goodput_gain_pct'])}%"
        )
    return "\n".join(out)


fmt = render.fmt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--requests", type=int, default=5000, help="requests per replay")
    ap.add_argument("--json", type=Path, help="write every figure (and evaluate's output) here")
    ap.add_argument(
        "--doc",
        type=Path,
        help=f"write the reproduction document here ({DOC.name}), its figures to {FIGURES.name}",
    )
    a = ap.parse_args()
    s = study(a.scenario, a.requests)
    print(printout(s))
    if a.json:
        write_atomic(a.json, json.dumps(s, indent=2, sort_keys=True) + "\n")
    if a.doc:
        text = json.dumps(slim(s), indent=2, sort_keys=True) + "\n"
        write_atomic(FIGURES, text)
        write_atomic(a.doc, doc.document(json.loads(text)))  # as the test reads it back


if __name__ == "__main__":
    main()
