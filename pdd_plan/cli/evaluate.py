"""`pdd-plan evaluate FILE`: the SLA goodput of a fleet that already exists, per architecture."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from pdd_plan.architectures import PATHS
from pdd_plan.cli.common import check_format, console, dumps, echo, guarded
from pdd_plan.common import limits
from pdd_plan.common.errors import InputError

if TYPE_CHECKING:  # rich loads when a table is printed
    from rich.console import Console


def _load(path: str):
    """(context, fleets) from a plan (`optimize --out`) or a scenario with a `fleet:` section."""
    from pdd_plan.evaluate import fleet
    from pdd_plan.inputs.context import build_context
    from pdd_plan.inputs.schema import Scenario
    from pdd_plan.inputs.schema.io import parse, read_yaml
    from pdd_plan.outputs.plan import parse_plan

    data = read_yaml(path)
    if isinstance(data, dict) and "plans" in data and "inputs" in data:
        plan = parse_plan(data, path)
        ctx = build_context(plan.inputs, path)
        note = None
        if plan.day is not None:  # said, not implied: the day's schedule is not what is judged
            note = (
                "a day's plan: each architecture's busiest-period fleet is evaluated, at its own "
                "$/h, not the day's base and elastic schedule"
            )
        return ctx, fleet.from_plan(ctx, plan, path), note
    ctx = build_context(parse(Scenario, data, path), path)
    return (*fleet.from_scenario(ctx), None)


@guarded
def evaluate_cmd(
    file: str = typer.Argument(
        ...,
        help="A plan from `pdd-plan optimize --out` (possibly edited), or a scenario with a "
        "`fleet:` section (or a bundled example's name, e.g. pdd-paper-fleet).",
    ),
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
    requests: int = typer.Option(
        5000, "--requests", "-n", help="Requests per simulator replay (>= 100)."
    ),
    step: float = typer.Option(
        0.02, "--step", help="One rate step, as a fraction of the rate (0.001-0.5)."
    ),
    no_simulate: bool = typer.Option(
        False, "--no-simulate", help="Analytic search only (no simulator verification)."
    ),
    tail_requests: int = typer.Option(
        1_000_000,
        "--tail-requests",
        help="Each replay's TTFT percentiles and checks: its prefill stage replayed alone over "
        "up to this many requests (fewer for a less busy pool), as optimize verifies a plan "
        "(~0.3-0.5 s of CPU a replay at 1M). 0: the replay's own.",
    ),
) -> None:
    """The highest request rate each architecture's fleet serves within the scenario's P90/P99
    TTFT and TPOT SLAs: analytic bisection, verified by the simulator at that rate and one step
    above. Cost, BCR, percentiles, path shares, and what gives out first."""
    from pdd_plan.evaluate import Options, evaluate

    fmt = check_format(format)
    if requests < 100:
        raise InputError(None, "--requests", f"must be >= 100 (got {requests})", "use 2000+")
    limits.check("REQUESTS", requests, None, "--requests")  # before any replay allocates
    if not (0.001 <= step <= 0.5):
        raise InputError(None, "--step", f"must be in [0.001, 0.5] (got {step:g})", "use 0.02")
    if tail_requests < 0:
        raise InputError(
            None, "--tail-requests", f"must be >= 0 (got {tail_requests})", "use 0 or 1000000"
        )
    limits.check("REQUESTS", tail_requests, None, "--tail-requests")
    from pdd_plan.inputs import profiles

    ctx, fleets, note = _load(profiles.scenario_path(file))
    opt = Options(not no_simulate, requests, step, tail_requests=tail_requests)
    ev = evaluate(ctx, fleets, opt)
    out = ev.with_note(note or None).as_dict()  # the JSON form: what is printed
    if fmt == "table":
        render(out, console())
    else:
        echo(dumps(out, fmt))
    if not out["architectures"]:
        raise typer.Exit(1)  # no architecture's fleet meets the SLA at any rate


def _f(x, nd: int = 2, scale: float = 1.0) -> str:
    return "-" if x is None else f"{x * scale:.{nd}f}"


ROWS = (
    ("SLA goodput req/s", lambda r: _f(r["goodput_rps"])),
    ("analytic req/s", lambda r: _f(r["analytic"]["goodput_rps"])),
    ("cost $/h", lambda r: _f(r["cost_per_hour"], 1)),
    ("BCR req/$", lambda r: _f(r["bcr"], 1)),
    ("TTFT p50 s", lambda r: _f(r["ttft_s"]["p50"])),
    ("TTFT p90 s", lambda r: _f(r["ttft_s"]["p90"])),
    ("TTFT p99 s", lambda r: _f(r["ttft_s"]["p99"])),
    ("TPOT p50 ms", lambda r: _f(r["tpot_ms"]["p50"], 1)),
    ("TPOT p90 ms", lambda r: _f(r["tpot_ms"]["p90"], 1)),
    *((f"{p} %", lambda r, p=p: _f(r["route_share"][p], 1, 100)) for p in PATHS),
    ("RLD tokens %", lambda r: _f(r["rld_token_share"], 1, 100)),
    ("gives out first", lambda r: r["gives_out_first"]["resource"]),
)


def render(out: dict, console: Console) -> None:
    from pdd_plan.report import layout

    archs = out["architectures"]
    sla = out["sla"]
    title = (
        f"evaluate {out['scenario']}: SLA goodput (TTFT P90 <= {sla['ttft_p90_s']:g} s, "
        f"P99 <= {sla['ttft_p99_s']:g} s, TPOT <= {sla['tpot_ms']:g} ms)"
    )
    if archs:
        cols = ["metric", *archs]
        rows = [[name, *(get(r) for r in archs.values())] for name, get in ROWS]
        legend = (
            "percentiles and path shares: "
            + (
                f"simulated ({out['sim_requests']:,} requests) at the goodput"
                if out["sim_requests"]
                else "analytic at the goodput"
            )
            + f"; one step = {out['step'] * 100:g}% of the rate; BCR = goodput x 3600 / cost"
        )
        layout.show(console, title, cols, rows, ["left"] + ["right"] * len(archs), legend, None)
    if out.get("note"):
        console.print(f"note: {out['note']}", highlight=False)
    for a, inf in out["infeasible"].items():
        r = inf["reasons"][0]
        console.print(f"{a}: infeasible ({r['kind']}): {r['message']}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate_cmd)
