"""`pdd-plan sweep`: optimize a scenario over a grid of values; table, JSON, CSV and a plot."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .. import profiles
from ..errors import InputError
from .common import check_format, dumps, echo, guarded, write_atomic

SWEEP_FORMATS = ("table", "json", "csv")


def _csv(result: dict) -> str:
    import pandas as pd

    from ..optimize.sweep import columns, rows

    cols = columns(result)
    df = pd.DataFrame(rows(result), columns=cols, dtype=object)  # object: ints stay ints
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n", na_rep="")
    return buf.getvalue()


def _fmt(x, nd: int = 2, pct: bool = False) -> str:
    if x is None:
        return "-"
    if pct:
        return f"{x * 100:.0f}%"
    return f"{x:,.{nd}f}" if isinstance(x, float) else str(x)


def _table(result: dict, console: Console) -> None:
    keys = [v["key"] for v in result["vary"]]
    t = Table(
        title=f"sweep {result['scenario']}: {len(result['points'])} points "
        f"({'verified' if result['verify'] else 'not verified'}; * = Pareto frontier)",
        show_lines=False,
    )
    for k in ["#", *keys]:
        t.add_column(k, justify="right")
    for c in ("arch", "status"):
        t.add_column(c)
    for c in ("$/hour", "goodput r/s", "BCR", "TTFT p90", "TTFT p99"):
        t.add_column(c, justify="right")
    if result["verify"]:
        t.add_column("sim SLA")
    t.add_column("routes md/rld-md/rld %", justify="right")
    t.add_column("GPUs", justify="right")
    t.add_column("line")
    t.add_column("*")
    notes = []
    for p in result["points"]:
        for a in result["architectures"]:
            r = p["architectures"][a]
            ok = r["status"] == "ok"
            cells = [str(p["index"]), *(str(p["values"][k]) for k in keys), a]
            cells.append(r["status"] if ok else f"[yellow]{r['status']}[/yellow]")
            cells += [
                _fmt(r["cost_per_hour"]),
                _fmt(r["goodput_rps"]),
                _fmt(r["bcr"], 1),
                _fmt(r["ttft_p90_s"]),
                _fmt(r["ttft_p99_s"]),
            ]
            if result["verify"]:
                met = r.get("sim_sla_met")
                cells.append("-" if met is None else ("yes" if met else "[red]no[/red]"))
            routes = "/".join(
                _fmt(r[f"route_{k}"], pct=True) for k in ("p_md", "p_rld_md", "p_rld")
            )
            cells += [
                routes.replace("%", "") if ok else "-",
                _fmt(r["gpus"]),
                r["line"] or "-",
                "*" if r["pareto"] else "",
            ]
            t.add_row(*cells)
            if not ok:
                notes.append(f"#{p['index']} {a}: {r['reason']}")
    console.print(t)
    for n in notes:
        console.print(f"[yellow]infeasible[/yellow] {n}", highlight=False, markup=True)


def _plot_png(result: dict) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"pdd": "#1f77b4", "cdc_pd": "#ff7f0e", "idc_pd": "#2ca02c"}
    markers = {"pdd": "o", "cdc_pd": "s", "idc_pd": "^"}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    any_ok = off_front = False
    for j, a in enumerate(result["architectures"]):
        c, m = colors.get(a, f"C{j}"), markers.get(a, "D")
        rows = {
            p["index"]: p["architectures"][a]
            for p in result["points"]
            if p["architectures"][a]["status"] == "ok"
        }
        if not rows:
            continue
        any_ok = True
        front = set(result["pareto"][a])
        rest = [r for i, r in rows.items() if i not in front]
        if rest:  # off the frontier: hollow
            off_front = True
            ax.scatter(
                [r["goodput_rps"] for r in rest],
                [r["cost_per_hour"] for r in rest],
                facecolors="none",
                edgecolors=c,
                marker=m,
                s=30,
                alpha=0.7,
            )
        on = sorted((rows[i]["goodput_rps"], rows[i]["cost_per_hour"]) for i in front)
        ax.plot(
            [g for g, _ in on],
            [x for _, x in on],
            color=c,
            marker=m,
            ms=7 - j,  # identical plans of two architectures stay visible
            lw=1.5,
            alpha=0.85,
            label=f"{a} (frontier)",
        )
    if off_front:
        ax.scatter([], [], facecolors="none", edgecolors="grey", label="off the frontier")
    if not any_ok:
        ax.text(0.5, 0.5, "no feasible point", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("goodput (requests/s)")
    ax.set_ylabel("cost ($/hour)")
    keys = ", ".join(v["key"] for v in result["vary"])
    ax.set_title(f"{result['scenario']}: sweep over {keys}")
    ax.grid(alpha=0.3)
    if any_ok:
        ax.legend(fontsize=8)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


class _Progress:
    """A transient rich bar on stderr, only on a terminal."""

    def __init__(self, enabled: bool):
        self.bar = None
        self.task = None
        self.enabled = enabled

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(
                TextColumn("sweep"),
                BarColumn(),
                MofNCompleteColumn(),
                console=Console(stderr=True),
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
        None, help="Scenario YAML (default: the bundled examples/pdd-paper.yaml)."
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
) -> None:
    """Optimize the scenario at every point of a grid; rows per point and architecture, with
    the Pareto frontier over (goodput up, cost down, BCR up) per architecture marked.

    An architecture with no plan at a point is a row with status infeasible and its reason.
    Rows come in point order whatever order they finish in: reruns give identical JSON / CSV.
    """
    from ..optimize.sweep import check_executor, parse_vary, sweep
    from ..schema.io import read_yaml

    fmt = check_format(format, SWEEP_FORMATS)
    if not vary:
        raise InputError(
            None,
            "--vary",
            "nothing to vary",
            "give at least one --vary KEY=START:STOP:STEP, e.g. --vary workload.rate_rps=20:60:20",
        )
    varies = [parse_vary(v) for v in vary]
    check_executor(executor)
    if plot is not None:
        if plot.suffix.lower() != ".png":
            raise InputError(str(plot), "--plot", "not a .png file name", "use FILE.png")
        if not plot.parent.exists():
            raise InputError(
                str(plot), "--plot", "folder does not exist", "create the folder or change the path"
            )
    path = str(profiles.example_path()) if scenario is None else scenario
    data = read_yaml(path)
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
        write_atomic(plot, _plot_png(result))
    if fmt == "json":
        echo(dumps(result, "json"))
    elif fmt == "csv":
        echo(_csv(result))
    else:
        # a pipe gets the whole table rather than an 80-column squeeze
        _table(result, Console() if sys.stdout.isatty() else Console(width=200))


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_cmd)
