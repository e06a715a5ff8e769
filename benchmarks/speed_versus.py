"""`pdd-plan optimize` on the default, this checkout against another, interleaved: per case the
median wall seconds, the CPU seconds of every process (the main one and the children it
waits for: the replays' child, the draws' child) and of the main process alone (the
critical path where the children run beside it), five rounds by default.

Run: python -m benchmarks.speed_versus /path/to/other/checkout [--rounds N] [--only CASE,...]

Each run is a fresh process of the `pdd-plan` entry point with PYTHONPATH at one checkout,
bytecode written (one untimed run of each first, as an installed user's later runs); each
round runs every case on the other checkout then on this one, so both see the same minutes of
a box whose load drifts. The outputs of the two checkouts are compared first (the same bytes
expected where a change is meant to be a speed-up only). On a shared box read the CPU
columns: the wall times stretch with the load, the CPU seconds much less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks import timed

ROOT = Path(__file__).resolve().parents[1]
# the entry point, with the main process's own CPU written to stderr as it exits
ENTRY = (
    "import atexit, resource, sys; atexit.register(lambda: sys.stderr.write("
    "'main-process-cpu %f\\n' % sum(resource.getrusage(resource.RUSAGE_SELF)[:2]))); "
    "sys.argv[0] = 'pdd-plan'; from pdd_plan.cli import main; main()"  # as the installed command
)
CASES = {
    "optimize": [],
    "optimize plain": ["--draws", "0"],
    "--no-verify plain": ["--no-verify", "--draws", "0"],
}


def run(checkout: Path, extra: list[str]) -> tuple[float, float, float, str]:
    """(wall, CPU of all processes, CPU of the main process, stdout) of one run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)
    done, wall, cpu = timed.run(
        [sys.executable, "-c", ENTRY, "optimize", "--format", "json", *extra],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: optimize {' '.join(extra)} failed: {done.stderr[-400:]}")
    own = [ln for ln in done.stderr.splitlines() if ln.startswith("main-process-cpu ")]
    return wall, cpu, float(own[-1].split()[1]), done.stdout


def table(times: dict[tuple[str, str], list[tuple[float, float, float, float]]]) -> str:
    """Markdown rows: per case and checkout the medians (wall, CPU all, CPU main) and loads."""
    rows = [
        "| case | checkout | runs | median wall s | fastest s | CPU s, all processes "
        "| CPU s, main process | load (1 min) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for (case, who), xs in times.items():

        def med(i: int, xs=xs) -> float:
            return statistics.median(x[i] for x in xs)

        loads = f"{min(x[3] for x in xs):.1f}-{max(x[3] for x in xs):.1f}"
        rows.append(
            f"| {case} | {who} | {len(xs)} | {med(0):.2f} | {min(x[0] for x in xs):.2f} "
            f"| {med(1):.2f} | {med(2):.2f} | {loads} |"
        )
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", type=Path, help="the other checkout (e.g. main's worktree)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated case names")
    args = ap.parse_args(argv)
    cases = [c.strip() for c in args.only.split(",") if c.strip()] or list(CASES)
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"--only: unknown case(s) {sorted(unknown)}: {sorted(CASES)}")
    sides = {"other": args.other.resolve(), "this": ROOT}
    for case in cases:  # untimed: bytecode written; the outputs compared
        outs = {who: run(path, CASES[case])[3] for who, path in sides.items()}
        same = "the same bytes" if outs["other"] == outs["this"] else "DIFFERENT outputs"
        print(f"{case}: {same}", file=sys.stderr, flush=True)
    times: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    for i in range(args.rounds):
        for case in cases:
            for who, path in sides.items():
                load = os.getloadavg()[0]
                w, c, own, _ = run(path, CASES[case])
                times.setdefault((case, who), []).append((w, c, own, load))
        print(f"round {i + 1} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    head = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs\n\n"
    print(head + table(times), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
