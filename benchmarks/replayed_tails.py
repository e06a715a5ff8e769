"""The plan's printed replayed TTFT tails against 1M-request replays of the same plan (the default).

Usage: ``python -m benchmarks.replayed_tails [--long 1000000] [--seeds 0 1 2] [--repeat 3]``

``optimize`` on the default scenario (examples/pdd-paper.yaml, no draws) twice: with
``--tail-requests 0`` (the figures are the 20,000-request verification replay's own) and with
the prefill stage replayed over ``--long`` requests (``sim.tails``; the CLI's default). For PDD and IDC-PD: each
printed TTFT P90 / P99 with its interval, against full replays of the same plan over
``--long`` requests at ``--seeds`` (the first is the scenario's seed, the plan's own): the
error against the same-seed replay, and the range over the seeds (what a 1M replay itself
varies by). Then the whole ``pdd-plan optimize`` process on the default (its draws included:
the composed replays run in the replay child beside them, ``optimize.tails``), wall and CPU
seconds, median of ``--repeat`` fresh processes each way, run alternately (a shared machine's
load falls on both alike).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import timed
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize
from pdd_plan.sim import run as sim_run

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "pdd-paper.yaml"
ARCHS = ("pdd", "idc_pd")
_CLI = "import sys; from pdd_plan.cli import main; sys.argv[0] = 'pdd-plan'; main()"


def _printed(long: int):
    ctx = build_context(load_scenario(SCENARIO), str(SCENARIO))
    t = time.perf_counter()
    plan = optimize(ctx, tail_requests=long)
    return ctx, plan, time.perf_counter() - t


def _full(ctx, plan, a: str, n: int, seed: int) -> np.ndarray:
    res = sim_run.replay_plan(ctx.replay_setup, plan, a, n, seed)
    return np.quantile(res.ttft_s[res.kept()], [0.9, 0.99])


def _wall(args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh `pdd-plan optimize` process (CPU: its user + system,
    its replay child's included)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    _, wall, cpu = timed.run(
        [sys.executable, "-c", _CLI, "optimize", "--format", "json", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
    )
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--long", type=int, default=1_000_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    runs = {0: _printed(0), args.long: _printed(args.long)}
    ctx, plan, _ = runs[0]
    print(
        f"Default scenario; printed TTFT percentiles (95% interval) against full replays of "
        f"the same plan over {args.long:,} requests (seeds {args.seeds}; the first is the "
        "plan's own seed).\n"
    )
    print("| arch | pct | full replay, same seed | full replays, seed range | printed | err |")
    print("|---|---|---:|---:|---:|---:|")
    for a in ARCHS:
        ref = np.array([_full(ctx, plan, a, args.long, s) for s in args.seeds])
        print(f"  {a}: {len(args.seeds)} full replays done", file=sys.stderr)
        for j, pct in enumerate(("p90", "p99")):
            for long, (_, p, _) in runs.items():
                sim = p.plans[a].simulated
                v = getattr(sim.ttft_s, pct)
                ci = (sim.ttft_s_ci or {}).get(pct)
                how = "stage x composed" if long else "20k replay"
                band = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
                print(
                    f"| {a} | {pct} | {ref[0, j]:.2f} | {ref[:, j].min():.2f}-{ref[:, j].max():.2f}"
                    f" | {v:.2f}{band} ({how}) | {v / ref[0, j] - 1:+.1%} |"
                )
    got: dict[str, list[tuple[float, float]]] = {"off": [], "tails": []}
    for _ in range(args.repeat):
        got["off"].append(_wall(["--tail-requests", "0"]))
        got["tails"].append(_wall(["--tail-requests", str(args.long)]))
    med = {k: [statistics.median(x[i] for x in v) for i in (0, 1)] for k, v in got.items()}
    print(
        f"\n`pdd-plan optimize` (default scenario, json), median of {args.repeat} fresh "
        f"processes, run alternately: --tail-requests 0 {med['off'][0]:.2f} s wall "
        f"({med['off'][1]:.2f} s CPU); --tail-requests {args.long:,} "
        f"{med['tails'][0]:.2f} s wall ({med['tails'][1]:.2f} s CPU). In-process optimize() "
        f"(no child, no draws, composed verdicts in the rounds): {runs[0][2]:.2f} vs "
        f"{runs[args.long][2]:.2f} s."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
