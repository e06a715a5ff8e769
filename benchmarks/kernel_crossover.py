"""Where a cached compiled loop pays for its load: the prefill pool's and the line's loops.

Usage: ``python -m benchmarks.kernel_crossover [--repeat 5] [--sizes 500,1000,...]``

Each measurement is a fresh process that first loads the decode event loop (every replay
needs it, so numba is up), then runs one loop's pure-Python version on ``n`` requests, loads
the compiled one from numba's cache and runs it on the same requests: the Python loop's
time against the load plus the compiled run is what ``sim.queue_kernel.LOAD_FROM`` decides
(wall by ``perf_counter``, CPU by ``process_time``; medians over ``--repeat`` processes). The
cache must be warm (run any replay once first). Prefill: two groups (6 and 2 servers),
Poisson arrivals at 60/s; line: 16 transfer slots, exponential sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time

import numpy as np


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    w, c = _clock()
    return w - t[0], c - t[1]


def child(which: str, n: int) -> dict:
    """One process's figures: (wall, CPU) seconds of the Python loop, the load, the run."""
    # the simulator's kernels, imported here (not at the top): the parent process only
    # starts children and must not load numba itself
    from pdd_plan.sim import queue_kernel as qk
    from pdd_plan.sim.decode import kernel
    from pdd_plan.sim.queues import (
        LineInputs,
        _compiled,
        _least_loaded_compiled,
        _least_loaded_python,
        _replay,
    )

    kernel.ready(kernel.run_events)
    rng = np.random.default_rng(n)
    out = {}
    if which == "prefill":
        counts = [6, 2]
        a = np.cumsum(rng.exponential(1 / 60, n))
        svc = [rng.exponential(0.1, n) for _ in counts]
        t = _clock()
        _least_loaded_python(a, svc, counts, None)
        out["python"] = _since(t)
        t = _clock()
        qk.ready(qk.least_loaded)
        out["load"] = _since(t)
        t = _clock()
        _least_loaded_compiled(a, svc, counts, None)
        out["run"] = _since(t)
    else:
        ready = np.sort(rng.uniform(0, n / 60, n))
        inp = LineInputs(
            ready, rng.permutation(n), rng.exponential(1e8, n), 1.25e10, 2.5e9, 16, 0.02
        )
        lists = ([math.nan] * n, [math.nan] * n, [0.0] * n, [])
        t = _clock()
        _replay(inp, None, lists, lambda *x: None)
        out["python"] = _since(t)
        t = _clock()
        qk.ready(qk.line_events)
        out["load"] = _since(t)
        t = _clock()
        _compiled(inp, n, lambda *x: None)
        out["run"] = _since(t)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="500,1000,2000,5000,10000,20000")
    ap.add_argument("--child", nargs=2, metavar=("LOOP", "N"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child[0], int(a.child[1]))))
        return 0
    sizes = [int(s) for s in a.sizes.split(",")]
    res: dict[tuple[str, int], list[dict]] = {}
    for _ in range(a.repeat):
        for which in ("prefill", "line"):
            for n in sizes:
                cmd = [
                    sys.executable,
                    "-m",
                    "benchmarks.kernel_crossover",
                    "--child",
                    which,
                    str(n),
                ]
                p = subprocess.run(cmd, capture_output=True, text=True, check=True)
                res.setdefault((which, n), []).append(json.loads(p.stdout))
    print("| loop | requests | Python ms (CPU) | load ms (CPU) | compiled run ms (CPU) |")
    print("|---|---:|---:|---:|---:|")
    for (which, n), runs in res.items():
        m = {k: statistics.median(r[k][1] for r in runs) * 1e3 for k in runs[0]}
        print(f"| {which} | {n:,} | {m['python']:.1f} | {m['load']:.1f} | {m['run']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
