"""`pdd-plan sweep`: optimize a scenario over a grid of values; table, JSON, CSV and a plot."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from pdd_plan.cli.common import check_format, console, dumps, echo, guarded, write_atomic
from pdd_plan.common import limits
from pdd_plan.common.atomic import check_output
from pdd_plan.common.errors import InputError

SWEEP_FORMATS = ("table", "json", "csv")
_SAY_POINTS = 20  # grids from this size say so off a terminal (they run for minutes)


class _Progress:
    """A transient rich bar on stderr on a terminal; elsewhere, for a grid of 20 points or
    more, one line with its size once the first point is done (every point is validated
    before, so no bad-key error follows it): a large grid is never silent for its whole run."""

    def __init__(self, enabled: bool):
        self.bar: Any = None  # a rich Progress once shown (rich imported only then)
        self.task = None
        self.enabled = enabled
        self.said = False

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            if not self.said and total >= _SAY_POINTS:
                print(f"sweep: {done:,} of {total:,} points done", file=sys.stderr, flush=True)
                self.said = True
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(
                TextColumn("sweep"),
                BarColumn(),
                MofNCompleteColumn(),
                console=console(stderr=True),
                transient=True,
            )
            self.bar.start()
            self.task = self.bar.add_task("points", total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


@guarded
def sweep_cmd(
    scenario: str = typer.Argument(
        None,
        help="Scenario YAML (default: the bundled examples/pdd-paper.yaml; or a bundled example's name, e.g. narrow-line).",
    ),
    vary: list[str] = typer.Option(
        None,
        "--vary",
        help="KEY=START:STOP:STEP, KEY a dotted path into the scenario YAML (sla.ttft_p90_s, "
        "workload.rate_rps, prices.h200, link.max_lines, datacenters.0.gpus.h100); STOP is "
        "included when on the grid. Repeat for the Cartesian product.",
    ),
    format: str = typer.Option("table", "--format", "-f", help="table | json | csv"),
    plot: Path = typer.Option(
        None, "--plot", help="Also write cost vs goodput per architecture, frontier drawn (PNG)."
    ),
    executor: str = typer.Option(
        "process",
        "--executor",
        help="process (default) | thread | serial | dask://HOST:PORT (a Dask scheduler; its "
        "workers need pdd-plan installed and any files the scenario names).",
    ),
    workers: int = typer.Option(
        None,
        "--workers",
        help="Pool size for process/thread (default: min(points, CPUs); 1 runs in this "
        "process). Ignored with Dask: the cluster decides.",
    ),
    verify: bool = typer.Option(
        False,
        "--verify/--no-verify",
        help="Replay every plan in the simulator and re-solve while it misses the SLA, as "
        "`optimize` does. Off by default: sweeps are for exploring, and verification costs "
        "seconds per point; verify the points you pick with `pdd-plan optimize`.",
    ),
    sim_requests: int = typer.Option(
        20000, "--sim-requests", help="Requests per verification replay (with --verify)."
    ),
    columns: str = typer.Option(
        None,
        "--columns",
        help="Table columns to add to the grid keys, architecture, status, $/h, goodput, BCR "
        "and Pareto star, comma-separated: ttft_p90, ttft_p99, gpus, line, routes, or all "
        "(default: as many as fit the terminal). --format csv has every field.",
    ),
) -> None:
    """Optimize the scenario at every point of a grid; rows per point and architecture, with
    the Pareto frontier over (goodput up, cost down, BCR up) per architecture marked.

    An architecture with no plan at a point is a row with status infeasible and its reason.
    Rows come in point order whatever order they finish in: reruns give identical JSON / CSV.
    """
    from pdd_plan.cli.sweep_grid import check_grid, parse_vary
    from pdd_plan.cli.sweep_plot import sweep_png
    from pdd_plan.cli.sweep_table import sweep_csv, sweep_table
    from pdd_plan.inputs.schema.io import read_yaml
    from pdd_plan.sweep.executors import check_executor
    from pdd_plan.sweep.run import sweep

    fmt = check_format(format, SWEEP_FORMATS)
    asked = _columns(columns)
    if not vary:
        raise InputError(
            None,
            "--vary",
            "nothing to vary",
            "give at least one --vary KEY=START:STOP:STEP, e.g. --vary workload.rate_rps=20:60:20",
        )
    varies = [parse_vary(v) for v in vary]
    check_grid(varies)
    check_executor(executor)
    limits.check("REQUESTS", sim_requests, None, "--sim-requests")
    if plot is not None and plot.suffix.lower() != ".png":
        raise InputError(str(plot), "--plot", "not a .png file name", "use FILE.png")
    from pdd_plan.inputs import profiles

    path = profiles.scenario_path(scenario)
    data = read_yaml(path)
    if plot is not None:  # not the scenario, a device or a missing folder: before any point
        check_output(plot, "--plot")
    progress = _Progress(sys.stderr.isatty())
    try:
        result = sweep(
            data,
            path,
            varies,
            verify=verify,
            sim_requests=sim_requests,
            executor=executor,
            workers=workers,
            progress=progress,
        )
    finally:
        progress.close()
    if plot is not None:
        write_atomic(plot, sweep_png(result))
    if fmt == "json":
        echo(dumps(result, "json"))
    elif fmt == "csv":
        echo(sweep_csv(result))
    else:
        # the table lays itself out to the console (a pipe: 80 columns); CSV is for machines
        sweep_table(result, console(), asked)


def _columns(text: str | None) -> list[str] | None:
    """--columns as names (checked before any point runs), None when not given."""
    from pdd_plan.cli.sweep_table import OPTIONAL

    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return list(OPTIONAL)
    bad = [n for n in names if n not in OPTIONAL]
    if bad or not names:
        raise InputError(
            None,
            "--columns",
            f"unknown column '{bad[0] if bad else text}'",
            f"use some of {', '.join(OPTIONAL)}, or all",
        )
    return names


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)
