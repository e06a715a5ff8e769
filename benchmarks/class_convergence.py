"""Whether plans converge in the number of request classes: large.yaml at 12 ... 192 classes.

Usage: ``python -m benchmarks.class_convergence [--classes 12,24,48,96,192] [--no-verify]``

Each count is a copy of `benchmarks/scenarios/large.yaml` with `workload.classes` set to it,
planned by `pdd-plan optimize FILE --draws 0 --timings --format json` in a fresh process
(verification by simulation on unless `--no-verify`; `--draws 0` skips the uncertainty draws,
which do not change a plan). Printed: the classes built, $/hour per architecture, the solver's
seconds over the architectures and the command's wall seconds. The slow test
`tests/integration/test_class_convergence.py` re-checks the agreement with the current models.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

LARGE = Path(__file__).resolve().parent / "scenarios" / "large.yaml"
ARCHS = ("pdd", "cdc_pd", "idc_pd")


def plan_at(n: int, tmp: Path, verify: bool) -> tuple[dict, float]:
    d = yaml.safe_load(LARGE.read_text(encoding="utf-8"))
    d["workload"]["classes"] = n
    f = tmp / f"large-{n}.yaml"
    f.write_text(yaml.safe_dump(d), encoding="utf-8")
    cmd = ["optimize", str(f), "--draws", "0", "--timings", "--format", "json"]
    cmd += [] if verify else ["--no-verify"]
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", "from pdd_plan.cli import main; main()", *cmd],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout), time.perf_counter() - t0


def row(n: int, plan: dict, wall: float) -> str:
    costs = []
    for a in ARCHS:
        p = plan["plans"].get(a)
        costs.append(f"{p['cost_per_hour']:.1f}" if p else "none")
    solver = sum(float(p["solver"].get("seconds", 0.0)) for p in plan["plans"].values())
    return f"| {n} | {plan['classes']} | {' | '.join(costs)} | {solver:.1f} | {wall:.1f} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--classes", default="12,24,48,96,192")
    ap.add_argument("--no-verify", action="store_true")
    args = ap.parse_args(argv)
    print(
        "| classes asked | classes built | pdd | cdc_pd | idc_pd | solver s (3 archs) "
        "| `optimize` wall s |\n|---:|---:|---:|---:|---:|---:|---:|"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.classes.split(",")):
            print(row(n, *plan_at(n, Path(tmp), not args.no_verify)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
