"""Parameter sweeps: optimize a scenario over a grid of values and mark the Pareto frontier.

Pure: no printing. The command line (`pdd-plan sweep`, cli/sweep.py) parses `--vary` into
`Vary` axes (cli/sweep_grid.py) and renders what `sweep` returns. The parts: the points
(sweep_points.py), where they run (sweep_executors.py), their rows (sweep_rows.py) and the
frontier (pareto.py). Results carry no solver timings, so the same inputs give the same output
byte for byte whatever the executor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from pdd_plan.common.errors import InfeasibleError, InputError, PddPlanError
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.io import parse
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.sweep.executors import check_executor, run_all
from pdd_plan.sweep.pareto import pareto_indices
from pdd_plan.sweep.points import Vary, grid, grid_scenarios
from pdd_plan.sweep.rows import columns, infeasible_rows, point_rows, rows

_FRONT_KEYS = ("goodput_rps", "cost_per_hour", "bcr")


class SweepPointError(PddPlanError):
    """A point failed for a reason other than infeasibility (carried back from a worker)."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self):  # picklable across processes and Dask workers
        return (SweepPointError, (str(self), self.exit_code))


def run_point(data: dict, file: str, verify: bool = False, sim_requests: int = 20_000) -> dict:
    """Worker: optimize one point; {architecture: row}, or {"error": ..., "exit_code": ...}.

    Top-level and returning plain data, so process pools and Dask workers can run it; errors
    travel back as data (the project's exceptions do not all pickle).
    """

    try:
        sc = parse(Scenario, data, file)
        archs = list(sc.architectures)
        try:
            plan = optimize(build_context(sc, file), verify=verify, sim_requests=sim_requests)
        except InfeasibleError as e:
            return infeasible_rows(e, archs, verify)
        return point_rows(plan, archs, verify)
    except PddPlanError as e:
        return {"error": str(e), "exit_code": e.exit_code}


def _mark_pareto(points: list[dict], archs: Sequence[str]) -> dict[str, list[int]]:
    """Each architecture's frontier over the points where it has a plan; flags its rows."""
    front: dict[str, list[int]] = {}
    for a in archs:
        idx = [p["index"] for p in points if p["architectures"][a]["status"] == "ok"]
        vals = [tuple(points[i]["architectures"][a][k] for k in _FRONT_KEYS) for i in idx]
        front[a] = [idx[j] for j in pareto_indices(vals)]
        for i in front[a]:
            points[i]["architectures"][a]["pareto"] = True
    return front


def _check_options(varies: Sequence[Vary], workers: int | None, sim_requests: int) -> None:
    if not varies:
        raise InputError(
            None, "--vary", "nothing to vary", "give at least one --vary KEY=START:STOP:STEP"
        )
    if workers is not None and workers < 1:
        raise InputError(None, "--workers", f"must be >= 1 (got {workers})", "use 1 or more")
    if sim_requests < 100:
        raise InputError(
            None, "--sim-requests", f"must be >= 100 (got {sim_requests})", "use a few thousand"
        )


def _raise_first_error(results: list[dict], varies: Sequence[Vary], values: list[tuple]) -> None:
    for i, r in enumerate(results):
        if r is not None and "error" in r:
            at = ", ".join(f"{v.key}={x}" for v, x in zip(varies, values[i]))
            raise SweepPointError(f"sweep point {i} ({at}): {r['error']}", r["exit_code"])


def sweep(
    data: dict,
    file: str,
    varies: Sequence[Vary],
    *,
    verify: bool = False,
    sim_requests: int = 20_000,
    executor: str | Executor = "process",
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Optimize `data` (a scenario as read from YAML) at every point of the grid.

    `executor`: "process" (default), "thread", "serial" (this process), "dask://HOST:PORT", or
    any concurrent.futures.Executor. `workers` (pools only): default min(points, CPUs); 1 runs
    the points in this process. Returns {"scenario", "vary", "verify", "architectures",
    "points", "pareto"}: points[i] = {"index", "values": {key: value}, "architectures":
    {architecture: row}}; pareto[architecture] = indices into points on its frontier.
    """

    _check_options(varies, workers, sim_requests)
    if isinstance(executor, str):
        check_executor(executor)
    scenarios = grid_scenarios(data, file, varies)
    base = Scenario.model_validate(data)
    archs = list(base.architectures)
    task = functools.partial(run_point, file=file, verify=verify, sim_requests=sim_requests)
    results = run_all(task, scenarios, executor, workers, progress, stop=lambda r: "error" in r)
    values = grid(varies)
    _raise_first_error(results, varies, values)
    points = [
        {
            "index": i,
            "values": {v.key: x for v, x in zip(varies, values[i])},
            "architectures": {a: results[i][a] for a in archs},
        }
        for i in range(len(scenarios))
    ]
    front = _mark_pareto(points, archs)
    return {
        "scenario": base.name,
        "objective": base.objective,
        "verify": verify,
        "vary": [v.as_dict() for v in varies],
        "architectures": archs,
        "points": points,
        "pareto": front,
    }


__all__ = ["Vary", "SweepPointError", "run_point", "sweep", "rows", "columns"]
