"""Simulator at scale: one million requests of the default scenario, wall time and peak memory.

Usage: ``python -m benchmarks.sim_scale [--n 1000000] [--architecture pdd] [--scenario FILE]``

Optimizes the scenario (not timed against the budget), then times ``pdd_plan.sim.run`` on ``n``
sampled requests: workload sampling, perf tables, prefill (least-loaded FIFO heap), line
(processor-sharing events) and decode (continuous-batching events), and the summary. Prints
when each stage started, the total, and the process's peak resident set (``ru_maxrss``)
before and after the run. Each stage also shows its CPU seconds (process time): on a shared
machine the wall time grows with the load, the CPU time much less. Target (issue 10): 1M requests in <= 5 s on a 2-core machine (issue 5
asked for <= 20 s).
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")  # as the CLI's entry point (cli/__init__.py)

import argparse
import json
import resource
import sys
import time

from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize
from pdd_plan.sim.run import run


def _maxrss_mib() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024 * 1024) if sys.platform == "darwin" else kb / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--architecture", default="pdd")
    ap.add_argument("--scenario", default=str(profiles.example_path()))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    t = time.perf_counter()
    ctx = build_context(load_scenario(args.scenario), args.scenario)
    plan = optimize(ctx)
    print(f"optimize: {time.perf_counter() - t:.2f} s (not part of the simulation time)")
    rss0 = _maxrss_mib()

    marks: dict[str, tuple[float, float]] = {}  # stage -> (wall, CPU) when it started
    t0, c0 = time.perf_counter(), time.process_time()

    def now() -> tuple[float, float]:
        return time.perf_counter() - t0, time.process_time() - c0

    def progress(stage: str, done: int, total: int) -> None:
        marks.setdefault(stage, now())

    res = run(ctx, plan, args.architecture, args.n, args.seed, progress=progress)
    t_run = now()
    s = res.summary()
    total = now()
    rss1 = _maxrss_mib()

    def row(name: str, a: tuple[float, float], b: tuple[float, float]) -> None:
        print(f"  {name:<23}{b[0] - a[0]:10.2f} s{b[1] - a[1]:10.2f} s")

    print(f"{args.n:,} requests, {args.architecture}, scenario {ctx.scenario.name}")
    print(f"  {'stage':<23}{'wall':>12}{'CPU':>12}")
    row("sampling + perf tables", (0.0, 0.0), marks.get("prefill", (0.0, 0.0)))
    stages = [k for k in ("prefill", "line", "decode") if k in marks]
    for i, k in enumerate(stages):
        row(k, marks[k], marks[stages[i + 1]] if i + 1 < len(stages) else t_run)
    row("summary", t_run, total)
    print(f"wall time: {total[0]:.2f} s ({total[0] / args.n * 1e6:.1f} us per request)")
    print(f"CPU time: {total[1]:.2f} s")
    print(f"peak RSS: {rss0:.0f} MiB before the run, {rss1:.0f} MiB after")
    keys = ("ttft_s", "tpot_ms", "kv_transfer_s", "line_utilization", "goodput_rps")
    print(json.dumps({k: s[k] for k in keys}))
    ok = total[0] <= 5.0 or args.n < 1_000_000
    print("target <= 5 s for 1M requests:", "met" if ok else "MISSED")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
