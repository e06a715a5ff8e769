"""Top-level commands: optimize, validate, profiles."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pdd_plan.cli.common import (
    DEBUG,
    PLAIN_HELP,
    _typer_group,
    check_format,
    console,
    dumps,
    echo,
    guarded,
    loading,
    write_atomic,
)
from pdd_plan.cli.progress import Stages, wanted
from pdd_plan.common import limits
from pdd_plan.common.atomic import check_output
from pdd_plan.common.errors import InputError

if TYPE_CHECKING:
    from pydantic import BaseModel

app = typer.Typer(
    cls=_typer_group(),
    add_completion=False,
    rich_markup_mode=PLAIN_HELP,
    no_args_is_help=True,
    help="Capacity planner and cost/BCR analyzer for PDD LLM serving.",
)
profiles_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=PLAIN_HELP, help="Bundled GPU, model and line profiles."
)
app.add_typer(profiles_app, name="profiles")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors.")) -> None:
    DEBUG["on"] = debug


def _scenario_path(scenario: str | None) -> str:
    from pdd_plan.inputs import profiles

    return profiles.scenario_path(scenario)


@app.command()
@guarded
def optimize(
    scenario: str = typer.Argument(
        None,
        help="Scenario YAML (default: the bundled examples/pdd-paper.yaml; or a bundled example's name, e.g. narrow-line).",
    ),
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
    out: Path = typer.Option(None, "--out", "-o", help="Also write the plan (YAML) here."),
    no_verify: bool = typer.Option(
        False, "--no-verify", help="Skip replaying each plan in the simulator."
    ),
    sim_requests: int = typer.Option(
        20000, "--sim-requests", help="Requests per verification replay."
    ),
    tail_requests: int = typer.Option(
        1_000_000,
        "--tail-requests",
        help="Each replay's TTFT percentiles and checks: its prefill stage replayed alone over "
        "up to this many requests (fewer for a less busy pool), composed with the rest of each "
        "replayed first token (about 0.5 s of CPU at 1M). 0: the replay's own (unsettled near "
        "a busy prefill pool).",
    ),
    timings: bool = typer.Option(
        False, "--timings", help="Add solver wall-clock seconds (output then differs run to run)."
    ),
    draws: int = typer.Option(
        None,
        "--draws",
        help="Evaluate every plan under N draws of the uncertain inputs (default: the "
        "scenario's uncertainty.draws, or 32; without an uncertainty: section, the perf error "
        "band alone). 0: skip.",
    ),
    robust: float = typer.Option(
        None,
        "--robust",
        help="Plan robust fleets: each architecture's cheapest fleet found meeting the SLA in "
        "at least this share of independent draws (e.g. 0.9; scenario search.robust).",
    ),
    verify_draws: int = typer.Option(
        0,
        "--verify-draws",
        "--confirm",
        help="Verify this many of the uncertainty draws: replay each in the simulator "
        "(--confirm: the same).",
    ),
    replan: bool = typer.Option(
        False,
        "--replan",
        help="Re-plan at the P10/P90 corners of the two strongest uncertain inputs: does the "
        "line option or an instance count change?",
    ),
) -> None:
    """Size prefill / relay-decode / main-decode pools and the line; compare with CDC-PD and IDC-PD."""
    with loading():
        from pdd_plan.inputs.context import build_context, load_scenario
        from pdd_plan.optimize import optimize as run
    with _replayer(not no_verify) as replayer:
        fmt = check_format(format)
        path = _scenario_path(scenario)
        sc = load_scenario(path)
        if out is not None:
            check_output(out, "--out")  # not over the scenario, a folder or a device: before work
        if sim_requests < 100:
            raise InputError(
                None,
                "--sim-requests",
                f"must be >= 100 (got {sim_requests})",
                "use a few thousand or more",
            )
        limits.check("REQUESTS", sim_requests, None, "--sim-requests")
        if tail_requests < 0:
            raise InputError(
                None, "--tail-requests", f"must be >= 0 (got {tail_requests})", "use 0 or 1000000"
            )
        limits.check("REQUESTS", tail_requests, None, "--tail-requests")
        q = robust if robust is not None else sc.search.robust
        _check_uncertainty_flags(sc, path, draws, robust, q, verify_draws, replan)
        ctx = build_context(sc, path)
        with Stages("optimize", wanted(fmt)) as bar:
            bar.stage("planning" if no_verify else "planning and replaying each plan")
            later: list = []
            plan = run(
                ctx,
                verify=not no_verify,
                sim_requests=sim_requests,
                timings=timings,
                replay_worker=replayer,
                tail_requests=tail_requests,
                deferred=later,
                idle=functools.partial(
                    _while_replaying, ctx, fmt, _ahead_options(draws, q, verify_draws, replan)
                ),
            )
            plan = _uncertain(ctx, plan, draws, q, verify_draws, replan, sim_requests, bar)
            if later:  # the composed replays ran beside the draws (optimize.tails)
                settled = later[0].settle(plan)
                if settled is None:  # a composed verdict differs: plan on them throughout
                    plan = run(
                        ctx,
                        sim_requests=sim_requests,
                        timings=timings,
                        replay_worker=replayer,
                        tail_requests=tail_requests,
                    )
                    plan = _uncertain(ctx, plan, draws, q, verify_draws, replan, sim_requests, bar)
                else:
                    plan = settled
        if out is not None:
            write_atomic(out, plan.to_text("yaml"))
        if fmt == "table":
            from pdd_plan.report.table import render_plan

            render_plan(plan, console())
        else:
            echo(plan.to_text(fmt))


def _uncertain(ctx, plan, draws, q, verify_draws, replan, sim_requests, bar):
    """The plan with its uncertainty block (draws, robust fleets, replays, re-plans) where
    asked or on by default (the flags were checked before planning); the bar names the stage."""
    # on by default for a plan at one rate (a day's plan has no single fleet to draw on)
    asked = draws != 0 and (draws is not None or plan.day is None)
    if asked or q is not None or verify_draws or replan:
        from pdd_plan.uncertainty import Options, plan_under_uncertainty

        opt = Options(
            draws=draws or None,
            robust=q,
            verify_draws=verify_draws,
            sim_requests=sim_requests,
            replan=replan,
        )
        what = "robust fleets and draws" if q is not None else "draws of the uncertain inputs"
        bar.stage(what)
        plan = plan_under_uncertainty(ctx, plan, opt)
    return plan


def _check_uncertainty_flags(sc, path, draws, robust, q, verify_draws, replan) -> None:
    """The draw flags, before any planning: each one honoured or refused in one line, never
    silently dropped (`--draws 0` skips the draws that --robust, --verify-draws and --replan need)."""
    if draws is not None:
        if draws == 1 or draws < 0:
            raise InputError(None, "--draws", f"must be 0 or >= 2 (got {draws})", "e.g. 32")
        limits.check("DRAWS", draws, None, "--draws")
    if q is not None and not 0 < q < 1:
        raise InputError(None, "--robust", f"must be a share in (0, 1) (got {q:g})", "e.g. 0.9")
    if verify_draws < 0:
        raise InputError(None, "--verify-draws", f"must be >= 0 (got {verify_draws})", "e.g. 4")
    limits.check("CONFIRM", verify_draws, None, "--verify-draws")
    flag = (
        "--robust"
        if q is not None
        else "--verify-draws"
        if verify_draws
        else "--replan"
        if replan
        else ""
    )
    if draws == 0 and flag:
        what = "search.robust" if robust is None and q is not None else flag
        raise InputError(
            None,
            "--draws",
            f"0 skips the draws, and {what} needs them",
            f"drop --draws 0 (or drop {what})",
        )
    n = draws or (sc.uncertainty.draws if sc.uncertainty is not None else 32)
    if verify_draws > n:
        raise InputError(
            None,
            "--verify-draws",
            f"{verify_draws} replays of {n} draws",
            f"use at most {n}, or more --draws",
        )
    w = sc.workload
    if (w.periods is not None or w.periods_from_trace is not None) and flag:
        field = "search.robust" if robust is None and q is not None else flag
        raise InputError(
            path if field == "search.robust" else None,
            field,
            "a day scenario (workload.periods) plans a base and an elastic schedule; this plans "
            "or replays one fleet at one rate, and the day's schedule would not follow it",
            f"drop {field}, or plan one rate without workload.periods",
        )


def _while_replaying(ctx, fmt: str, opt, plans: dict, ready) -> None:
    """What follows the plan, started while the planner waits on its first replay: the
    modules the draws and the table load (~0.1 s), and the draws' first line chains for the
    plans as solved (`uncertainty.block.head_start`, taken up where they are the plans kept)
    until the replay is back."""
    from pdd_plan.uncertainty import block

    if fmt == "table":
        import pdd_plan.report.table  # noqa: F401
    if opt is not None:
        try:
            block.head_start(ctx, plans, opt, ready)
        except Exception:  # noqa: BLE001  (only a head start: the draws raise it in their turn)
            from pdd_plan.uncertainty import ahead

            ahead.forget()


def _ahead_options(draws, q, verify_draws, replan):
    """The draws' options where `_uncertain` will draw with nothing but them (the default
    path), else None (no head start)."""
    if draws == 0 or q is not None or verify_draws or replan:
        return None
    from pdd_plan.uncertainty import Options

    return Options(draws=draws or None)


def _replayer(verify: bool) -> contextlib.AbstractContextManager:
    """The replays' child, started once the command's modules are loaded (the child inherits
    them where it would import them again: ~0.2 s of CPU on the default), so that numba loads
    on the second core while this process reads the scenario and plans; none without
    verification."""
    if not verify:
        return contextlib.nullcontext()
    from pdd_plan.sim.worker import started  # a light module, and only where a plan replays

    return started(True)


def _preflight(sc, file: str) -> None:
    """Every check `optimize` (and `evaluate`, for a fleet) runs before it solves, so that
    validate never says ok where they fail on the same file: profile names and files, the
    trace (found, readable, its rows), the request classes, the fleet against the datacenters."""
    from pdd_plan.inputs.context import build_context
    from pdd_plan.workload.classes import build_classes

    ctx = build_context(sc, file)
    build_classes(ctx.class_spec)
    if sc.fleet is not None:
        from pdd_plan.evaluate import fleet

        fleet.from_scenario(ctx)


@app.command()
@guarded
def validate(file: str = typer.Argument(..., help="A scenario or profile YAML.")) -> None:
    """Check a scenario (or a GPU / model / line profile) and say what is wrong, if anything."""
    from pdd_plan.inputs.schema import GPUProfile, LineSKU, ModelProfile, Scenario
    from pdd_plan.inputs.schema.io import parse, read_yaml

    data = read_yaml(file)
    kind: type[BaseModel] = Scenario
    if isinstance(data, dict) and "plans" in data and "schema_version" in data:
        from pdd_plan.outputs.plan import parse_plan

        parse_plan(data, file)  # its own one-line errors: a plan's fields, not a scenario's
        echo(
            f"ok: {file} is a valid plan, not a scenario (simulate, report, emit and evaluate "
            "read it; validate the scenario it was planned from with `pdd-plan validate`)\n"
        )
        return
    if isinstance(data, dict):
        if "compute" in data:
            kind = GPUProfile
        elif "attention" in data:
            kind = ModelProfile
        elif "gbps" in data and "cost_per_month" in data:
            kind = LineSKU
    obj = parse(kind, data, file)
    if kind is Scenario:
        _preflight(obj, file)
    echo(f"ok: {file} is a valid {kind.__name__}\n")


@profiles_app.command("list")
@guarded
def profiles_list(
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
) -> None:
    """List bundled profiles."""
    from pdd_plan.inputs import profiles

    fmt = check_format(format)
    data = {k: profiles.bundled_names(k) for k in profiles.KINDS}
    if fmt == "table":
        for k, names in data.items():
            echo(f"{k}: {', '.join(names)}\n")
    else:
        echo(dumps(data, fmt))


@profiles_app.command("show")
@guarded
def profiles_show(
    name: str = typer.Argument(..., help="Profile name (GPU, model or line)."),
    format: str = typer.Option("yaml", "--format", "-f", help="yaml | json"),
) -> None:
    """Show one profile, with the quantities computed from it (models: params, KV bytes/token)."""
    from pdd_plan.inputs import profiles

    fmt = check_format(format, ("yaml", "json"))
    for kind in profiles.KINDS:
        if name in profiles.bundled_names(kind):
            obj: Any = profiles.load_profile(kind, name)
            data = obj.model_dump(mode="json")
            if kind == "models":
                from pdd_plan.perf import layers

                p = layers.param_counts(obj)
                w = layers.weight_bytes(obj)
                data["computed"] = {
                    "total_params_b": round(p.total / 1e9, 2),
                    "active_params_b": round(p.active / 1e9, 2),
                    "weight_gb": round(w["total"] / 1e9, 1),
                    "kv_bytes_per_token": round(layers.kv_bytes_per_token(obj), 1),
                    "kv_fixed_bytes_per_request": round(layers.kv_fixed_bytes_per_request(obj), 1),
                    "weight_flops_per_token": round(layers.weight_flops_per_token(obj)),
                }
            if kind == "gpus":
                from pdd_plan.calibration.fit import factors_at_bound

                data["factors_at_bound"] = factors_at_bound(obj.efficiency)
            echo(dumps(data, fmt))
            return
    every = [n for k in profiles.KINDS for n in profiles.bundled_names(k)]
    import difflib

    close = difflib.get_close_matches(name, every, n=1)
    raise InputError(
        None,
        "NAME",
        f"no bundled profile '{name}'",
        f"did you mean '{close[0]}'?" if close else "see `pdd-plan profiles list`",
    )


def _register_more() -> None:
    from pdd_plan.cli.workload import register

    register(app)


_register_more()


from pdd_plan.cli.perf import register as _register_perf  # noqa: E402

_register_perf(app, profiles_app)


from pdd_plan.cli.sim import register as _register_sim  # noqa: E402

_register_sim(app)


from pdd_plan.cli.deploy import register as _register_deploy  # noqa: E402

_register_deploy(app)


from pdd_plan.cli.evaluate import register as _register_evaluate  # noqa: E402

_register_evaluate(app)


from pdd_plan.cli.sweep import register as _register_sweep  # noqa: E402

_register_sweep(app)


from pdd_plan.cli.line import register as _register_line  # noqa: E402

_register_line(app)
from pdd_plan.cli.regimes import register as _register_regimes  # noqa: E402

_register_regimes(app)
from pdd_plan.cli.precompile import register as _register_compile  # noqa: E402

_register_compile(app)
