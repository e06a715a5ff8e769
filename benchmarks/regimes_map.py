"""The default regime map end to end: `pdd-plan regimes --no-verify`, pooled and serial.

Usage: ``python -m benchmarks.regimes_map [--executors process,serial] [ARGS for regimes]``

Runs the default map (the default scenario, every architecture per cell) as a fresh
`pdd-plan regimes --no-verify --json FILE` process per executor, timed from start to exit
(wall; CPU of the process and the children it waits for: a process pool's forkserver workers
are not counted, so the pooled row has none). Prints the times, the cells per regime and
whether the executors wrote the same map. Target: <= 60 s for the 10 x 10 map.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchmarks import timed


def run(executor: str, out: Path, extra: list[str]) -> tuple[dict, float, float]:
    cmd = ["regimes", "--no-verify", "--executor", executor, "--json", str(out), *extra]
    _, wall, cpu = timed.run(
        [sys.executable, "-c", "from pdd_plan.cli import main; main()", *cmd],
        capture_output=True,
        check=True,
    )
    return json.loads(out.read_text(encoding="utf-8")), wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--executors", default="process,serial")
    args, extra = ap.parse_known_args(argv)
    rows, maps = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for ex in args.executors.split(","):
            m, wall, cpu = run(ex, Path(tmp) / f"{ex}.json", extra)
            maps.append(m)
            cells = len(m["cells"])
            met = "met" if wall <= 60 else "MISSED"
            cpu_s = "" if ex == "process" else f"{cpu:.1f}"
            rows.append(f"| {cells} cells | {ex} | {wall:.1f} | {cpu_s} | <= 60 s: {met} |")
    m = maps[0]
    counts = ", ".join(f"{k} {v}" for k, v in m["counts"].items())
    same = all(x == m for x in maps[1:])
    print(f"Map of `{m['scenario']}`, x `{m['x']['name']}`, y `{m['y']['name']}`")
    print(f"cells by regime: {counts}; the executors' maps {'agree' if same else 'DIFFER'}.")
    print("\n| run | executor | wall s | CPU s | target |\n|---|---|---:|---:|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
