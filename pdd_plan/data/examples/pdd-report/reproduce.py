"""The PDD report's experiment, reproduced: every prediction beside the report's figure.

    python examples/pdd-report/reproduce.py [--requests N] [--json FILE]

Runs `pdd-plan evaluate` on pdd-report.yaml (the same call, requests and seed as the CLI),
then replays CDC-PD on PDD's fleet at PDD's goodput, because the report compares the TTFT
percentiles of the two at one load. Only IDC-PD's goodput was calibrated (the file's
speed_factor); every other row is a prediction. docs/reproduction.md explains each row.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pdd_plan.common.atomic import write_atomic
from pdd_plan.evaluate import Options, analytic, evaluate
from pdd_plan.evaluate.fleet import deployed_inputs, from_scenario
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.search.caps import Caps
from pdd_plan.sim.run import verify
from pdd_plan.workload.classes import build_classes

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "pdd-report.yaml"

# The report's figures (pdd-facts.md). Ranges are (low, high).
REPORT = {
    "idc_goodput": 9.0,
    "pdd_goodput": 11.5,
    "goodput_gain_pct": 27.8,
    "cost_change_pct": (-7.1, -3.5),
    "bcr_gain_pct": (32.4, 37.5),
    "cdc_ttft_p90_s": 18.3,
    "pdd_ttft_p90_s": 9.8,
    "cdc_ttft_p99_s": 29.7,
    "pdd_ttft_p99_s": 14.4,
    "ttft_p90_change_pct": -46.0,
    "ttft_p99_change_pct": -51.5,
    "rld_token_share_pct": 6.0,
}
# The report's cost table in GPU-A hours: 88 A against 43 A + 32 B + the line (~0.3 A).
REPORT_GPUS = {"idc_pd": {"h100": 88}, "pdd": {"h100": 43, "h200": 32}}


def _pct(new: float, old: float) -> float:
    return 100.0 * (new / old - 1.0)


def cdc_at(ctx, fs, rate: float, n: int) -> dict | None:
    """CDC-PD's simulated TTFT percentiles on its fleet at `rate` (None: its analytic model
    finds no routing there, so there is no plan to replay)."""
    pb, rs = deployed_inputs(problem_of(ctx), ctx.replay_setup, fs.speed_factor)
    fm = analytic.fleet_model(
        pb, fs, build_classes(ctx.class_spec), Caps(ctx.scenario.search.decode_utilization)
    )
    at = analytic.at_rate(fm, rate)
    if at.plan is None:
        return None
    p = at.plan.model_copy(update={"goodput_rps": float(rate)})
    v = verify(rs, p, "cdc_pd", n, rs.seed)
    return {
        "rate_rps": rate,
        "ttft_s": {k: v["checks"][f"ttft_{k}"]["simulated"] for k in ("p90", "p99")},
    }


def _report_cost(ctx, gpus: dict[str, int], line_per_hour: float = 0.0) -> float:
    """$/hour of the report's GPU counts at the scenario's prices (and a line)."""
    return sum(n * ctx.gpus[g].price.usd_per_gpu_hour for g, n in gpus.items()) + line_per_hour


def study(path: Path = SCENARIO, requests: int = 5000) -> dict:
    """Evaluate the file and set each prediction beside the report's figure."""
    ctx, fleets = from_scenario(build_context(load_scenario(path), str(path)))
    ev = evaluate(ctx, fleets, Options(sim_requests=requests))
    a = ev["architectures"]
    pdd, idc, cdc = a["pdd"], a["idc_pd"], a["cdc_pd"]
    cdc_same = cdc_at(ctx, fleets["cdc_pd"], pdd["goodput_rps"], requests)
    cdc_ttft = (cdc_same or cdc)["ttft_s"]
    line = pdd["fleet"]["line"]["cost_per_hour"]
    bcr_report_counts = _pct(
        pdd["goodput_rps"] / _report_cost(ctx, REPORT_GPUS["pdd"], line),
        idc["goodput_rps"] / _report_cost(ctx, REPORT_GPUS["idc_pd"]),
    )
    ours = {
        "idc_goodput": idc["goodput_rps"],
        "pdd_goodput": pdd["goodput_rps"],
        "goodput_gain_pct": _pct(pdd["goodput_rps"], idc["goodput_rps"]),
        "cost_change_pct": _pct(pdd["cost_per_hour"], idc["cost_per_hour"]),
        "bcr_gain_pct": _pct(pdd["bcr"], idc["bcr"]),
        "cdc_ttft_p90_s": cdc_ttft["p90"],
        "pdd_ttft_p90_s": pdd["ttft_s"]["p90"],
        "cdc_ttft_p99_s": cdc_ttft["p99"],
        "pdd_ttft_p99_s": pdd["ttft_s"]["p99"],
        "ttft_p90_change_pct": _pct(pdd["ttft_s"]["p90"], cdc_ttft["p90"]),
        "ttft_p99_change_pct": _pct(pdd["ttft_s"]["p99"], cdc_ttft["p99"]),
        "rld_token_share_pct": 100.0 * (pdd["rld_token_share"] or 0.0),
    }
    return {
        "scenario": str(path),
        "speed_factor": {k: fs.speed_factor for k, fs in fleets.items()},
        "report": REPORT,
        "pdd_plan": {k: round(v, 4) for k, v in ours.items()},
        "bcr_gain_pct_at_report_gpu_counts": round(bcr_report_counts, 2),
        "cdc_pd_at_pdd_goodput": cdc_same,
        "cdc_pd_goodput": cdc["goodput_rps"],
        "evaluate": ev,
    }


def _fmt(x) -> str:
    if isinstance(x, tuple):
        return f"{x[0]:g} to {x[1]:g}"
    return f"{x:.3g}"


def _error(ours: float, ref) -> str:
    if isinstance(ref, tuple):
        lo, hi = ref
        if lo <= ours <= hi:
            return "inside"
        near = lo if ours < lo else hi
        return f"{ours - near:+.3g} from the range"
    return f"{_pct(ours, ref):+.1f}%" if ref else "-"


def table(s: dict) -> str:
    rows = ["| figure | report | pdd-plan | error |", "|---|---:|---:|---:|"]
    for k, ref in s["report"].items():
        ours = s["pdd_plan"][k]
        err = (
            _error(ours, ref)
            if not k.endswith("_pct") or isinstance(ref, tuple)
            else f"{ours - ref:+.1f} pt"
        )
        note = " (calibrated)" if k == "idc_goodput" else ""
        rows.append(f"| {k}{note} | {_fmt(ref)} | {ours:.3g} | {err} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--requests", type=int, default=5000, help="requests per replay")
    ap.add_argument("--json", type=Path, help="write every figure (and evaluate's output) here")
    a = ap.parse_args()
    s = study(a.scenario, a.requests)
    print(f"speed_factor (calibrated on IDC-PD only): {s['speed_factor']}")
    print(table(s))
    print(
        f"BCR gain at the report's GPU counts (43 A + 32 B + line vs 88 A): "
        f"{s['bcr_gain_pct_at_report_gpu_counts']:+.1f}%"
    )
    print(f"CDC-PD's own SLA goodput on PDD's fleet: {s['cdc_pd_goodput']:.3f} req/s")
    if a.json:
        write_atomic(a.json, json.dumps(s, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
