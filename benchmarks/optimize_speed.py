"""Wall time of `optimize` on the bundled default scenario (all three architectures).

Run: python benchmarks/optimize_speed.py [SCENARIO] [--repeat N]
Prints one markdown row per run and the median; the figure goes into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from pdd_plan.optimize import optimize
from pdd_plan.profiles import example_path
from pdd_plan.resolve import load_scenario, resolve


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?", default=str(example_path()))
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        plan = optimize(resolve(load_scenario(a.scenario), a.scenario))
        times.append(time.perf_counter() - t0)
    milps = {k: p["solver"]["milps"] for k, p in plan["plans"].items()}
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    print("| scenario | runs | median s | min s | MILPs per architecture |")
    print("|---|---|---|---|---|")
    print(f"| {plan['scenario']} | {a.repeat} | {statistics.median(times):.2f} | {min(times):.2f} | {milps} |")


if __name__ == "__main__":
    main()
