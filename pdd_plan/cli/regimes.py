"""`pdd-plan regimes`: where PDD pays, over two axes; a grid on stdout, JSON/CSV and a heatmap.

An axis is `NAME=START:STOP:STEP` (as `sweep --vary` spells a range) or `NAME=V1,V2,...` (any
values, e.g. model names). NAME is a named axis (transfer_gbps, line_gbps, rate_rps,
low_hit_share, line_price, rtt_ms, model; regimes/axes.py says how each is read) or a dotted scenario key.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import typer

from pdd_plan.cli.common import check_format, dumps, echo, flag_names, guarded, write_atomic
from pdd_plan.common import limits
from pdd_plan.common.atomic import check_output
from pdd_plan.common.errors import InputError

REGIME_FORMATS = ("table", "json", "csv")
DEFAULT_X = "transfer_gbps=0.05,0.1,0.15,0.2,0.25,0.3,0.5,1,2,5"
DEFAULT_Y = "rate_rps=2:20:2"
_NUM_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_INT_RE = re.compile(r"^[+-]?\d+$")


def _value(text: str) -> int | float | str:
    """A listed value: an integer or a number as written, else the text (a model name)."""
    t = text.strip()
    if _INT_RE.match(t):
        return int(t)
    if _NUM_RE.match(t):
        return float(t)
    return t


def _check_name(flag: str, name: str) -> None:
    from pdd_plan.inputs.schema.scenario import Scenario
    from pdd_plan.sweep.regimes.axes import NAMED

    if "." in name or name in NAMED or name in Scenario.model_fields:
        return
    import difflib

    close = difflib.get_close_matches(name, [*NAMED, *Scenario.model_fields], n=1)
    raise InputError(
        None,
        f"{flag} {name}",
        f"unknown axis '{name}'",
        f"did you mean '{close[0]}'?"
        if close
        else f"use one of {', '.join(NAMED)} or a dotted scenario key",
    )


def parse_axis(flag: str, spec: str):
    """`NAME=START:STOP:STEP` or `NAME=V1,V2,...` -> a RegimeAxis; errors name `flag`."""
    from pdd_plan.cli.sweep_grid import parse_vary
    from pdd_plan.sweep.regimes.axes import RegimeAxis

    name, sep, rest = spec.partition("=")
    name = name.strip()
    if not sep or not name or not rest.strip():
        raise InputError(
            None,
            flag,
            f"'{spec}' is not NAME=START:STOP:STEP or NAME=V1,V2,...",
            f"e.g. {flag} {DEFAULT_X}",
        )
    _check_name(flag, name)
    if ":" in rest:
        try:
            v = parse_vary(f"{name}={rest}")
        except InputError as e:  # parse_vary names the sweep's --vary: here it is this flag
            raise InputError(None, f"{flag} {name}", e.problem, e.fix) from None
        return RegimeAxis(name, v.values)
    values = tuple(_value(t) for t in rest.split(","))
    if any(v == "" for v in values):
        raise InputError(None, f"{flag} {name}", f"an empty value in '{rest}'", "list V1,V2,...")
    if any(isinstance(v, float) and not math.isfinite(v) for v in values):
        raise InputError(
            None, f"{flag} {name}", f"a value in '{rest}' is not finite", "use numbers"
        )
    if len(set(values)) != len(values):
        raise InputError(
            None, f"{flag} {name}", f"a value is listed twice in '{rest}'", "list each once"
        )
    return RegimeAxis(name, values)


def _check_size(x, y) -> None:
    # the sweep's cap (each cell is three optimizations): a grid beyond it is a typo in STEP
    limits.check("SWEEP_POINTS", len(x.values) * len(y.values), None, "--x, --y")
    if x.name == y.name:
        raise InputError(None, f"--y {y.name}", "the same axis as --x", "vary two different things")


def _outputs(json_out: Path | None, csv_out: Path | None, png: Path | None) -> None:
    for path, flag, suffix in (
        (json_out, "--json", ".json"),
        (csv_out, "--csv", ".csv"),
        (png, "--png", ".png"),
    ):
        if path is None:
            continue
        if path.suffix.lower() != suffix:
            raise InputError(str(path), flag, f"not a {suffix} file name", f"use FILE{suffix}")
        check_output(path, flag)


@guarded
def regimes_cmd(
    scenario: str = typer.Argument(
        None,
        help="Scenario YAML (default: the bundled examples/pdd-paper.yaml; or a bundled example's name, e.g. narrow-line).",
    ),
    x: str = typer.Option(
        DEFAULT_X,
        "--x",
        help="Across: NAME=START:STOP:STEP or NAME=V1,V2,... NAME: transfer_gbps (the rate one "
        "transfer gets, the default), line_gbps (one line of that "
        "many Gb/s, priced as the bundled line profiles interpolate), rate_rps, low_hit_share "
        "(requests below 95% hit), line_price ($/Gb/s/month), rtt_ms, model, or a dotted "
        "scenario key.",
    ),
    y: str = typer.Option(DEFAULT_Y, "--y", help="Up: as --x."),
    format: str = typer.Option("table", "--format", "-f", help="table | json | csv (stdout)"),
    json_out: Path = typer.Option(None, "--json", help="Also write the map as JSON here."),
    csv_out: Path = typer.Option(None, "--csv", help="Also write one CSV row per cell here."),
    png: Path = typer.Option(None, "--png", help="Also write the heatmap (PNG) here."),
    dpi: int = typer.Option(100, "--dpi", help="The heatmap's resolution (dots per inch)."),
    executor: str = typer.Option(
        "process", "--executor", help="process (default) | thread | serial | dask://HOST:PORT."
    ),
    workers: int = typer.Option(
        None, "--workers", help="Pool size (default: min(cells, CPUs); 1 runs in this process)."
    ),
    verify: bool = typer.Option(
        False,
        "--verify/--no-verify",
        help="Replay every cell's plans in the simulator as `optimize` does (seconds per cell). "
        "Off by default: the map is analytic; verify the cells you care about with `optimize`.",
    ),
    sim_requests: int = typer.Option(
        20000, "--sim-requests", help="Requests per verification replay (with --verify)."
    ),
) -> None:
    """Where PDD pays: optimize PDD, CDC-PD and IDC-PD at every cell of a two-axis grid and map
    PDD's BCR gain over each and its relay share; infeasible cells are marked."""
    from pdd_plan.cli.sweep import _Progress
    from pdd_plan.inputs.schema.io import read_yaml
    from pdd_plan.sweep.executors import check_executor
    from pdd_plan.sweep.regimes.grid import regime_map
    from pdd_plan.sweep.regimes.output import csv_text, table_text

    fmt = check_format(format, REGIME_FORMATS)
    ax, ay = parse_axis("--x", x), parse_axis("--y", y)
    _check_size(ax, ay)
    check_executor(executor)
    if workers is not None and workers < 1:
        raise InputError(None, "--workers", f"must be >= 1 (got {workers})", "use 1 or more")
    if sim_requests < 100:
        raise InputError(
            None, "--sim-requests", f"must be >= 100 (got {sim_requests})", "use a few thousand"
        )
    limits.check("REQUESTS", sim_requests, None, "--sim-requests")
    if not 20 <= dpi <= 600:
        raise InputError(None, "--dpi", f"must be 20 to 600 (got {dpi})", "e.g. 100")
    from pdd_plan.inputs import profiles

    path = profiles.scenario_path(scenario)
    data = read_yaml(path)
    _outputs(json_out, csv_out, png)  # after the scenario is read: none may be written over it
    progress = _Progress(sys.stderr.isatty())
    flags = {f"axis {ax.name}": f"--x {ax.name}", f"axis {ay.name}": f"--y {ay.name}"}
    try:
        with flag_names(**flags, axes=f"--x {ax.name}, --y {ay.name}"):
            result = regime_map(
                data,
                path,
                ax,
                ay,
                verify=verify,
                sim_requests=sim_requests,
                executor=executor,
                workers=workers,
                progress=progress,
            )
    finally:
        progress.close()
    if json_out is not None:
        write_atomic(json_out, dumps(result, "json"))
    if csv_out is not None:
        write_atomic(csv_out, csv_text(result))
    if png is not None:
        from pdd_plan.sweep.regimes.plot import regime_png

        write_atomic(png, regime_png(result, dpi))
    if fmt == "json":
        echo(dumps(result, "json"))
    elif fmt == "csv":
        echo(csv_text(result))
    else:
        echo(table_text(result))


def register(app: typer.Typer) -> None:
    app.command("regimes")(regimes_cmd)
