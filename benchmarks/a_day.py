"""A day of periods planned as one fleet: `pdd-plan optimize` on the bundled day scenarios.

Usage: ``python -m benchmarks.a_day [--scenario NAME ...]``

Each scenario (default: `a-day`, `a-day-narrow-line`) runs as a fresh `pdd-plan optimize
NAME --format json` process (start-up, imports and every period's verification replay
included), timed from start to exit (wall, and the CPU of the process and its children).
Printed per architecture: the day's cost (base fleet, elastic instances, lines), the cost of
the busiest period's plan run all day, the day's requests per dollar, and whether every
period's replay met the SLA. Target (issue 18): <= 30 s a scenario.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks import timed

DEFAULT = ("a-day", "a-day-narrow-line")


def run(name: str) -> tuple[dict, float, float]:
    """The plan's JSON, the wall seconds and the CPU seconds of the process and its children."""
    out, wall, cpu = timed.run(
        [
            sys.executable,
            "-c",
            "from pdd_plan.cli import main; main()",
            "optimize",
            name,
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ),
    )
    return json.loads(out.stdout), wall, cpu


def table(name: str, plan: dict, wall: float, cpu: float) -> str:
    day = plan["day"]
    lines = [
        f"`pdd-plan optimize {name}`: {wall:.2f} s wall, {cpu:.2f} s CPU "
        f"({day['hours']:g} h in {len(next(iter(day['architectures'].values()))['periods'])} "
        f"periods; target <= 30 s: {'met' if wall <= 30 else 'MISSED'})",
        "",
        "| architecture | $/day | base | elastic | lines | busiest period's plan all day | "
        "vs it | requests per $ | SLA met every period |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for arch, a in day["architectures"].items():
        vs = a["cost_day"] / a["peak_plan_cost_day"] - 1
        lines.append(
            f"| {arch} | {a['cost_day']:,.0f} | {a['cost_base']:,.0f} | {a['cost_elastic']:,.0f} "
            f"| {a['cost_line']:,.0f} | {a['peak_plan_cost_day']:,.0f} | {vs:+.1%} "
            f"| {a['bcr']:.1f} | {'yes' if a['sla_met'] else 'no'} |"
        )
    gains = ", ".join(
        f"{k.replace('_', ' ').replace(' pd', '-PD').upper().replace('VS ', 'vs ')} {'(no plan to compare)' if v is None else format(v, '+.1%')}"
        for k, v in day["bcr_gain"].items()
    )
    lines += ["", f"The day's requests per dollar, PDD {gains}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--scenario", nargs="+", default=list(DEFAULT))
    args = ap.parse_args(argv)
    print("\n".join(table(n, *run(n)) for n in args.scenario), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
