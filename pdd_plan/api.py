"""The Python entry points: the CLI's steps as functions, on typed values.

    >>> from pdd_plan import api
    >>> ctx = api.build_context(api.load_scenario("pdd-paper"), "pdd-paper")
    >>> plan = api.optimize(ctx, verify=False)  # doctest: +SKIP

`load_scenario` reads a scenario by bundled name (``pdd-plan optimize --help`` lists them) or
by path; `build_context` resolves it (profiles, lines, sites); `optimize` plans every
architecture, `simulate` replays a plan, `evaluate` measures a fleet that already exists. Each
loads what it needs when called, so importing this module costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # hints only: the planner and the simulator load when called
    from pdd_plan.evaluate.fleet import FleetSpec
    from pdd_plan.evaluate.result import Evaluation
    from pdd_plan.evaluate.run import Options
    from pdd_plan.inputs.context import Context
    from pdd_plan.inputs.schema.scenario import Scenario
    from pdd_plan.outputs.plan import Plan
    from pdd_plan.sim.result import SimResult
    from pdd_plan.sim.setup import PlanLike


def scenario_file(name_or_path: str | Path) -> str:
    """The file of a scenario given by bundled name (``"pdd-paper"``) or by path (returned as
    it is, resolved against the working directory when relative)."""
    from pdd_plan.inputs import profiles  # (each entry loads its stage when called)

    return profiles.scenario_path(str(name_or_path))


def load_scenario(name_or_path: str | Path) -> Scenario:
    """The validated scenario of a bundled name (``"pdd-paper"``, from any directory) or a
    file path. A clear one-line error (`InputError`) names what is wrong."""
    from pdd_plan.inputs import context  # (as above)

    return context.load_scenario(scenario_file(name_or_path))


def build_context(scenario: Scenario | str | Path, file: str | Path | None = None) -> Context:
    """The scenario resolved: its model and GPU profiles, line options and sites.

    `scenario`: a loaded `Scenario`, or a bundled name or path (read here). `file`: where the
    scenario's own relative paths (a trace, a model profile ``.yaml``) are read from and what
    error messages name; a bundled name or a path. By default the file `scenario` was read
    from when it is a name or path, else the working directory (enough for a scenario that
    names only bundled profiles, as every bundled example but the trace replays does)."""
    from pdd_plan.inputs import context  # (as above)

    if isinstance(scenario, str | Path):
        path = scenario_file(scenario)
        return context.build_context(context.load_scenario(path), str(file or path))
    return context.build_context(scenario, scenario_file(file) if file is not None else "")


def optimize(
    ctx: Context,
    verify: bool = True,
    sim_requests: int = 20_000,
    tail_requests: int = 1_000_000,
    **kw: Any,
) -> Plan:
    """Plan every architecture the scenario lists (`pdd-plan optimize`); `verify` replays
    each plan and re-solves while its replay misses the SLA, its TTFT figures and checks
    composed with the prefill stage replayed over up to `tail_requests` (0: the replay's own),
    as the command does. See :func:`pdd_plan.optimize.optimize` for the other options."""
    from pdd_plan.optimize import optimize as run  # (as above)

    return run(ctx, verify=verify, sim_requests=sim_requests, tail_requests=tail_requests, **kw)


def simulate(
    ctx: Context,
    plan: PlanLike,
    architecture: str = "pdd",
    n_requests: int | None = None,
    seed: int | None = None,
    **kw: Any,
) -> SimResult:
    """Replay the scenario's workload on one architecture of `plan` (`pdd-plan simulate`);
    the result's ``summary()`` has its percentiles. See :func:`pdd_plan.sim.run.run`."""
    from pdd_plan.sim.run import run  # (as above)

    return run(ctx, plan, architecture, n_requests, seed, **kw)


def evaluate(
    ctx: Context, fleets: dict[str, FleetSpec], options: Options | None = None
) -> Evaluation:
    """The SLA goodput of existing fleets, per architecture (`pdd-plan evaluate`); fleets
    from `pdd_plan.evaluate.fleet` (``from_scenario``, ``from_plan``)."""
    from pdd_plan.evaluate.run import evaluate as run  # (as above)

    return run(ctx, fleets, options)


__all__ = ["build_context", "evaluate", "load_scenario", "optimize", "scenario_file", "simulate"]
