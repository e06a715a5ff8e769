"""Calibrate the engine speed factor that makes `pdd-plan evaluate` give IDC-PD the report's
9.0 req/s on its fleet: the first of the reproduction's two calibrations (the line, fitted on
the report's handoff microbenchmark, is the other: reproduce.py).

    python studies/pdd-report/calibrate_speed.py [--write] [--requests N]

Bisection on log(speed_factor) over [0.1, 2]: IDC-PD's SLA goodput (the simulator-verified
figure `evaluate` reports, with the same requests and seed as `pdd-plan evaluate`) rises
with the speed, so the bracket halves until it is within `--tol` (relative) of the speed or
the goodput is within 0.5% of 9.0 req/s. Nothing about PDD is read: its goodput is a
prediction. Then it scans IDC-PD's prefill/decode splits of the same 6 instances at the
found speed (analytic search) and says whether the file's split is still the best one.
`--write` puts the value into both `speed_factor:` lines of pdd-report.yaml (atomically).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from pathlib import Path

from pdd_plan.common.atomic import forget_inputs, write_atomic
from pdd_plan.evaluate import Options, evaluate
from pdd_plan.evaluate.fleet import from_scenario
from pdd_plan.inputs.context import build_context, load_scenario

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "pdd-report.yaml"
TARGET_RPS = 9.0  # the report's IDC-PD SLA goodput (pdd-facts.md)
LOW, HIGH = 0.1, 2.0  # the bracket: a tenth of the modelled speed to twice it


def idc_goodput(path: Path, speed: float, opt: Options) -> float:
    """IDC-PD's SLA goodput on the file's fleet when its engine runs at `speed`."""
    sc = load_scenario(path).model_copy(update={"architectures": ["idc_pd"]})
    ctx, fleets = from_scenario(build_context(sc, str(path)))
    fs = dataclasses.replace(fleets["idc_pd"], speed_factor=speed)
    out = evaluate(ctx, {"idc_pd": fs}, opt).as_dict()
    r = out["architectures"].get("idc_pd")
    return 0.0 if r is None else float(r["goodput_rps"])


def calibrate(
    path: Path, opt: Options, tol: float = 0.005, log=print
) -> tuple[float, float, list[tuple[float, float]]]:
    """(speed, IDC-PD goodput there, every (speed, goodput) tried): the tried speed whose
    goodput is closest to TARGET_RPS once the bracket is narrow."""
    lo, hi = math.log(LOW), math.log(HIGH)
    tried: list[tuple[float, float]] = []
    for end in (LOW, HIGH):
        g = idc_goodput(path, end, opt)
        tried.append((end, g))
        log(f"  speed {end:.4f}: IDC-PD {g:.3f} req/s")
    if not tried[0][1] <= TARGET_RPS <= tried[1][1]:
        raise SystemExit(f"{TARGET_RPS} req/s is not between the bracket's goodputs {tried}")
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        s = math.exp(mid)
        g = idc_goodput(path, s, opt)
        tried.append((s, g))
        log(f"  speed {s:.4f}: IDC-PD {g:.3f} req/s")
        if abs(g - TARGET_RPS) <= 0.005 * TARGET_RPS:
            break
        lo, hi = (mid, hi) if g < TARGET_RPS else (lo, mid)
    best = min(tried, key=lambda t: (abs(t[1] - TARGET_RPS), t[0]))
    return best[0], best[1], tried


def split_scan(path: Path, speed: float, total: int = 6) -> list[tuple[int, int, float]]:
    """(prefill, decode, analytic IDC-PD goodput) for every split of `total` instances."""
    sc = load_scenario(path)
    rows = []
    for n_p in range(1, total):
        f = sc.fleet["idc_pd"]
        groups = [
            g.model_copy(update={"count": n_p if g.role == "prefill" else total - n_p})
            for g in f.instances
        ]
        fleet = {**sc.fleet, "idc_pd": f.model_copy(update={"instances": groups})}
        s2 = sc.model_copy(update={"fleet": fleet, "architectures": ["idc_pd"]})
        ctx, fleets = from_scenario(build_context(s2, str(path)))
        fs = dataclasses.replace(fleets["idc_pd"], speed_factor=speed)
        out = evaluate(ctx, {"idc_pd": fs}, Options(simulate=False)).as_dict()
        r = out["architectures"].get("idc_pd")
        rows.append((n_p, total - n_p, 0.0 if r is None else r["goodput_rps"]))
    return rows


def write_speed(path: Path, speed: float) -> None:
    """Both `speed_factor:` lines of the file set to `speed`, comments kept."""
    text = path.read_text()
    new, n = re.subn(r"(?m)^(\s+speed_factor:) [0-9.]+", rf"\g<1> {speed:.3f}", text)
    if n != 2:
        raise SystemExit(f"{path}: expected 2 speed_factor lines, found {n}")
    forget_inputs()  # the scenario was read as an input; rewriting it in place is the point
    write_atomic(path, new)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", type=Path, default=SCENARIO)
    ap.add_argument("--requests", type=int, default=5000, help="requests per replay")
    ap.add_argument("--tol", type=float, default=0.005, help="relative width of the bracket")
    ap.add_argument("--write", action="store_true", help="write the value into the scenario")
    a = ap.parse_args()
    print(f"bisection on IDC-PD's SLA goodput, target {TARGET_RPS} req/s:")
    speed, g, tried = calibrate(a.scenario, Options(sim_requests=a.requests), a.tol)
    speed = round(speed, 3)
    print(f"speed_factor {speed:.3f}: IDC-PD {g:.3f} req/s ({len(tried)} evaluations)")
    print("IDC-PD splits of 6 instances at that speed (analytic goodput):")
    rows = split_scan(a.scenario, speed)
    for n_p, n_d, r in rows:
        print(f"  {n_p} prefill + {n_d} decode: {r:.3f} req/s")
    f = load_scenario(a.scenario).fleet["idc_pd"]
    mine = next(g.count for g in f.instances if g.role == "prefill")
    top = max(rows, key=lambda t: t[2])[0]
    print(f"the file's split ({mine} prefill) is {'the' if top == mine else 'NOT the'} best")
    if a.write:
        write_speed(a.scenario, speed)
        print(f"wrote speed_factor {speed:.3f} to {a.scenario}")


if __name__ == "__main__":
    main()
