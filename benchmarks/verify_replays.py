"""The verification replays' cost inside `pdd-plan optimize`, in fresh processes, medians.

Usage: ``python -m benchmarks.verify_replays [--repeat 5] [--scenario NAME] [--against DIR]``

Each run is a new Python process running the CLI (``optimize --draws 0 --format json``) with
the verification stage timed inside it: the time in ``optimize.verify.verified`` less the
solves and summaries it calls, i.e. importing the simulator and numba, loading or compiling
the kernels, and the replays themselves (wall by ``perf_counter``, CPU by ``process_time``).
The whole process is timed from outside (wall; CPU as the child's user + system).

``--against DIR``: a second checkout (another commit, its own numba cache) run alternately
with this one, run by run, so a shared machine's load falls on both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from benchmarks import timed

ROOT = Path(__file__).resolve().parents[1]

# what the child runs: the CLI with the verification stage's own time taken apart
_CHILD = r"""
import json, sys, time
import pdd_plan.optimize.verify as V
spent = {"wall": 0.0, "cpu": 0.0}
def _timed(fn):
    def run(*a, **k):
        w, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            spent["wall"] += time.perf_counter() - w
            spent["cpu"] += time.process_time() - c
    return run
inner = {"wall": 0.0, "cpu": 0.0}
def _excluded(fn):
    def run(*a, **k):
        w, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            inner["wall"] += time.perf_counter() - w
            inner["cpu"] += time.process_time() - c
    return run
V.verified = _timed(V.verified)
V.solve_architecture = _excluded(V.solve_architecture)
V.optimize_summary.summarize = _excluded(V.optimize_summary.summarize)
import pdd_plan.optimize as O
O.verified = V.verified
from pdd_plan.cli import main
sys.argv = ["pdd-plan", "optimize", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps({k: spent[k] - inner[k] for k in spent}), file=sys.stderr)
"""


def _one(root: Path, args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    env.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")  # as the CLI sets it, before numpy loads
    p, wall, cpu = timed.run(
        [sys.executable, "-c", _CHILD, *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    stage = json.loads(p.stderr.strip().splitlines()[-1])
    return {"wall": wall, "cpu": cpu, "replay_wall": stage["wall"], "replay_cpu": stage["cpu"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scenario", default=None)
    ap.add_argument("--against", default=None, help="another checkout, run alternately")
    a = ap.parse_args(argv)
    args = ([a.scenario] if a.scenario else []) + ["--draws", "0", "--format", "json"]
    roots = {"this": ROOT} | ({"against": Path(a.against).resolve()} if a.against else {})
    runs: dict[str, list[dict]] = {k: [] for k in roots}
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for _ in range(a.repeat):
        for name, root in roots.items():
            runs[name].append(_one(root, args))
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print(
        "| checkout | process wall s (fastest) | process CPU s "
        "| replay stage wall s (fastest) | replay stage CPU s |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        low = {k: min(r[k] for r in rs) for k in rs[0]}
        print(
            f"| {name} ({roots[name]}) | {med['wall']:.2f} ({low['wall']:.2f}) | "
            f"{med['cpu']:.2f} | {med['replay_wall']:.3f} ({low['replay_wall']:.3f}) | "
            f"{med['replay_cpu']:.3f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
