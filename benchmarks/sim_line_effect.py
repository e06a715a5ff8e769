"""The hit-rate *shape*, not its mean, sets the line's KV-transfer percentiles.

Usage: ``python -m benchmarks.sim_line_effect [--n 100000] [--seed 0]``

Same fleet, same line, same rate, same mean prefill-side hit rate (90%): only the spread of
the hit rates differs.

* ``skewed``  - most requests hit >= 95%, a few hit little: 91.4% uniform in [0.95, 1.0],
  8.6% uniform in [0, 0.2] (mean 0.900);
* ``narrow``  - every request hits 85-95% (uniform, mean 0.900).

Bytes on the line have the same mean, so the line is equally loaded, but under processor
sharing the skewed mix's many small transfers finish fast (a much lower median) while its few
low-hit giants still queue behind each other and make a long P99. The fleet is the one the
optimizer plans for the default scenario (examples/pdd-paper.yaml); the comparison runs as
CDC-PD (every request over the line) so that the relay does not hide the line.
"""

from __future__ import annotations

import argparse
import json

import yaml

from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.sim.run import run
from pdd_plan.workload.distributions import mean

SHAPES = {
    "skewed": [[0.0, 0.2, 0.085714], [0.95, 1.0, 0.914286]],
    "narrow": [[0.85, 0.95, 1.0]],
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--architecture", default="cdc_pd")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)

    path = profiles.example_path()
    base = yaml.safe_load(path.read_text())
    ctx0 = build_context(Scenario.model_validate(base), str(path))
    plan = optimize(ctx0)  # one fleet and line for both shapes
    p = plan.arch(args.architecture)
    rows = {}
    for name, hist in SHAPES.items():
        d = {**base, "workload": {**base["workload"], "prefix_hit": {"histogram": hist}}}
        ctx = build_context(Scenario.model_validate(d), str(path))
        s = run(ctx, plan, args.architecture, args.n, args.seed).summary()
        rows[name] = {
            "mean_hit": round(mean(ctx.scenario.workload.prefix_hit), 4),
            "sim_mean_hit": s["hit_rate"]["prefill_mean"],
            "line_utilization": s["line_utilization"],
            "line_mb_mean": round(s["line_bytes_mean"] / 1e6, 2),
            "kv_transfer_s": s["kv_transfer_s"],
            "ttft_s": s["ttft_s"],
            "connection_wait_p99_s": s["connection_pool"]["wait_s"]["p99"],
        }
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    ln = p.line
    print(
        f"{args.n:,} requests at {plan.rate_rps} req/s, {args.architecture}, "
        f"line {ln.count} x {ln.sku}, same fleet for both shapes"
    )
    hdr = (
        f"{'shape':<8}{'mean hit':>9}{'line util':>10}{'MB/req':>8}"
        f"{'KV p50 s':>10}{'KV p90 s':>10}{'KV p99 s':>10}{'TTFT p50':>10}{'TTFT p99':>10}"
    )
    print(hdr)
    print("-" * len(hdr))
    for name, r in rows.items():
        kv, tt = r["kv_transfer_s"], r["ttft_s"]
        print(
            f"{name:<8}{r['sim_mean_hit']:>9.3f}{r['line_utilization']:>10.3f}"
            f"{r['line_mb_mean']:>8.1f}{kv['p50']:>10.3f}{kv['p90']:>10.3f}{kv['p99']:>10.3f}"
            f"{tt['p50']:>10.3f}{tt['p99']:>10.3f}"
        )
    sk, nw = rows["skewed"]["kv_transfer_s"], rows["narrow"]["kv_transfer_s"]
    print(
        f"skewed / narrow: median KV transfer x{sk['p50'] / nw['p50']:.2f}, "
        f"P99 x{sk['p99'] / nw['p99']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
