"""The fleet MILP over many operating points: its size and time at 1, 8, 24 and 64 points.

Run: python -m benchmarks.operating_points [--points 1,8,24,64] [--arch pdd,cdc_pd,idc_pd]

On the default scenario (examples/pdd-paper.yaml), per architecture, the fixed-rate search's
winning combination (its prefill pool, decode options and line options at the scenario's rate)
is planned over N points. Prints markdown tables:

1. A day: N periods of 24/N hours, the rate the scenario's times a diurnal factor
   0.7 + 0.3 cos(2 pi (h - 15) / 24) (peak 1.0 at 15:00, trough 0.4 at 03:00: an assumed
   shape, peak/trough 2.5). The peak's tables are built once; the TTFT path tables are rebuilt
   once per distinct rate (the prefill wait and the line's load move with it). Then the same
   day with elastic decode instances at 1.5x the base price (each datacenter can add its GPUs).
2. Draws: N points that differ only by a decode-speed factor (seeded lognormal, sigma 0.1) at
   the scenario's rate, with a chance cap of 10 % of the draws: the points share the nominal
   path tables (nothing rebuilt), so the tables cost N rows of scale factors.

Columns: seconds to build the points' tables, path-table sets built, the MILP's rows, columns
and integers (binaries included) as handed to HiGHS, seconds to build and solve it, $/hour
averaged over the points, and the shared base's main- and relay-decode instances.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from pdd_plan.architectures import get
from pdd_plan.inputs.context import Context, build_context, load_scenario
from pdd_plan.inputs.profiles import example_path
from pdd_plan.optimize import milp, points, problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search import at_rates, fixed_rate
from pdd_plan.optimize.search.enumeration import Shared
from pdd_plan.optimize.tables import FleetTables
from pdd_plan.workload.classes import build_classes
from pdd_plan.workload.requests import RequestClasses

DAY_TARGET_S = 10.0  # 24 points: tables, build and solve
ELASTIC_PRICE = 1.5  # x the base price
SPEED_SIGMA = 0.1
MAX_VIOLATION = 0.1


def diurnal(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Hours of day of n equal periods and their rate factors (see the module docstring)."""
    hours = np.arange(n) * 24.0 / n
    return hours, 0.7 + 0.3 * np.cos(2 * np.pi * (hours - 15.0) / 24.0)


def _elastic(ctx: Context, t: FleetTables, n: int) -> points.Elastic:
    sites = tuple(sorted((d.name, g) for d in ctx.scenario.datacenters for g in d.gpus))
    gpus = {(d.name, g): k for d in ctx.scenario.datacenters for g, k in d.gpus.items()}
    cost = np.array([c.cost_per_hour * ELASTIC_PRICE for c in t.md + t.rld])
    return points.Elastic(cost, sites, np.tile([gpus[s] for s in sites], (n, 1)))


def _base(t: FleetTables, sol: milp.PointsSolution) -> str:
    md = sum(sol.counts.get(c.key, 0) for c in t.md)
    rld = sum(sol.counts.get(c.key, 0) for c in t.rld)
    return f"{md} / {rld}"


def _row(label: str, n: int, tables_s: float, sets: int, pts: points.OperatingPoints) -> str:
    t0 = time.perf_counter()
    sol = milp.solve_points(pts, time_limit_s=120.0)
    solve_s = time.perf_counter() - t0
    if sol is None:  # past the time limit HiGHS may stop with no incumbent: not infeasibility
        why = "none within 120 s" if solve_s >= 120.0 else "infeasible"
        return f"| {label} | {n} | {tables_s:.2f} | {sets} | {why} | | | {solve_s:.2f} | | |"
    z = sol.size
    return (
        f"| {label} | {n} | {tables_s:.2f} | {sets} | {z['rows']:,} | {z['columns']:,} | "
        f"{z['integers']} | {solve_s:.2f} | {sol.cost_per_hour:,.2f} | {_base(pts.nominal, sol)} |"
    )


def day_rows(ctx: Context, a: str, cls: RequestClasses, n: int) -> list[str]:
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    rate = float(ctx.scenario.workload.rate_rps)
    p = fixed_rate.plan(problem_of(ctx), get(a), cls, rate, caps)
    t = p.tables
    sh = Shared.of(problem_of(ctx), get(a), cls, caps)
    _, factor = diurnal(n)
    rates = rate * factor if n > 1 else np.array([rate])
    t0 = time.perf_counter()
    pts = at_rates.rate_points(sh, t.meta["combo"], t.lines, rates, [24.0 / n] * n)
    tables_s = time.perf_counter() - t0
    sets = len({float(r) for r in rates})
    el = points.points(
        pts.nominal,
        pts.weight,
        list(pts.rate_rps),
        line_level=pts.line_level,
        paths=pts.paths,
        elastic=_elastic(ctx, t, n),
    )
    return [
        _row(f"{a}, day", n, tables_s, sets, pts),
        _row(f"{a}, day, elastic {ELASTIC_PRICE:g}x", n, tables_s, sets, el),
    ]


def draw_rows(ctx: Context, a: str, cls: RequestClasses, n: int) -> list[str]:
    caps = Caps(decode=ctx.scenario.search.decode_utilization)
    rate = float(ctx.scenario.workload.rate_rps)
    t = fixed_rate.plan(problem_of(ctx), get(a), cls, rate, caps).tables
    rng = np.random.default_rng(2026)
    t0 = time.perf_counter()
    speed = np.exp(rng.normal(0.0, SPEED_SIGMA, n)) if n > 1 else np.ones(1)
    cap = MAX_VIOLATION if n > 1 else None
    pts = points.points(t, [1.0 / n] * n, [rate] * n, decode_speed=speed, max_violation=cap)
    tables_s = time.perf_counter() - t0
    return [_row(f"{a}, draws, chance {MAX_VIOLATION:g}", n, tables_s, 1, pts)]


HEADER = [
    "| case | points | tables s | path-table sets | rows | columns | integers | "
    "build + solve s | $/h (mean) | base MD / RLD |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", default="1,8,24,64")
    ap.add_argument("--arch", default="pdd,cdc_pd,idc_pd")
    args = ap.parse_args(argv)
    ns = [int(x) for x in args.points.split(",")]
    path = str(example_path("pdd-paper"))
    ctx = build_context(load_scenario(path), path)
    cls = build_classes(ctx.class_spec)
    print(f"{platform.node()} {platform.processor() or platform.machine()}, {time.ctime()}")
    print("\n".join(HEADER))
    for a in args.arch.split(","):
        for n in ns:
            t0 = time.perf_counter()
            rows = day_rows(ctx, a, cls, n)
            print("\n".join(rows), flush=True)
            if n == 24:
                took = time.perf_counter() - t0
                print(f"<!-- {a}: 24-point day incl. its search {took:.2f} s -->", flush=True)
        for n in ns:
            print("\n".join(draw_rows(ctx, a, cls, n)), flush=True)
    print(f"\ntarget: a 24-point day's tables, build and solve <= {DAY_TARGET_S:g} s")


if __name__ == "__main__":
    main()
