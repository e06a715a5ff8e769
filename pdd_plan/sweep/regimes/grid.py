"""A regime map: optimize PDD, CDC-PD and IDC-PD at every cell of a two-axis grid.

Pure: no printing. Each cell is the scenario with the two axes set (regimes/axes.py) and all
three architectures listed; it is validated before anything solves, then the cells run through
the sweep's executors (optimize/sweep_executors.py: serial, process pool, threads, Dask) with
the sweep's row reader (optimize/sweep_rows.py), so a cell holds exactly what `optimize` returns
at that point. Per cell: each architecture's row, PDD's BCR gain over CDC-PD and over IDC-PD
(the plan's own comparison), PDD's relay shares, and a regime label.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from pydantic import ValidationError

from pdd_plan.architectures import LINE_BASELINE, RELAY_ARCH
from pdd_plan.common.errors import InfeasibleError, InputError, PddPlanError
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.io import parse, validation_to_input_error
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.optimize import optimize
from pdd_plan.sweep.executors import check_executor, run_all
from pdd_plan.sweep.regimes.axes import RegimeAxis, apply_axes
from pdd_plan.sweep.regimes.cells import ARCHS, GAIN_LINE, GAIN_LOCAL, REGIMES
from pdd_plan.sweep.rows import infeasible_rows, point_rows
from pdd_plan.sweep.run import SweepPointError

_TIE = 1e-9  # BCRs are rounded to 4 decimals by the plan; equal fleets give equal figures


def run_cell(data: dict, file: str, verify: bool = False, sim_requests: int = 20_000) -> dict:
    """Worker: optimize one cell; its rows, PDD's comparison and RLD token share, or
    {"error", "exit_code"} (top-level and plain data, so process pools and Dask can run it)."""

    try:
        sc = parse(Scenario, data, file)
        archs = list(sc.architectures)
        try:
            plan = optimize(build_context(sc, file), verify=verify, sim_requests=sim_requests)
        except InfeasibleError as e:
            return {"rows": infeasible_rows(e, archs, verify), "comparison": {}, "rld": None}
        relay = plan.plans.get(RELAY_ARCH)
        return {
            "rows": point_rows(plan, archs, verify),
            "comparison": plan.comparison.model_dump(),
            "rld": relay.rld_token_share if relay is not None else None,
        }
    except PddPlanError as e:
        return {"error": str(e), "exit_code": e.exit_code}


def _check_cell(data: dict, file: str, at: str, field: str = "axes") -> None:
    """Validate and resolve one cell; a failure names the axes (`field`) and their values."""

    try:
        try:
            sc = Scenario.model_validate(data)
        except ValidationError as e:
            raise validation_to_input_error(Scenario, e, file) from None
        build_context(sc, file)
    except InputError as inner:
        where = f"{inner.field}: " if inner.field else ""
        raise InputError(None, field, f"{at}: {where}{inner.problem}", inner.fix) from None


def build_cells(data: dict, file: str, x: RegimeAxis, y: RegimeAxis) -> list[dict]:
    """The validated scenario dict of every cell, row by row (y outer, x inner)."""

    if x.name == y.name:
        raise InputError(None, f"axis {y.name}", "both axes are the same", "vary two things")
    x.check()
    y.check()
    build_context(parse(Scenario, data, file), file)  # the base scenario's own errors name the file
    base = {**data, "architectures": list(ARCHS)}  # the map compares all three
    out = []
    for yv in y.values:
        for xv in x.values:
            cell = apply_axes(base, (x, y), (xv, yv), file)
            try:
                _check_cell(cell, file, f"{x.name}={xv}, {y.name}={yv}")
            except InputError:  # name the one axis at fault when one alone is
                for ax, v in ((x, xv), (y, yv)):
                    one = apply_axes(base, (ax,), (v,), file)
                    _check_cell(one, file, f"{ax.name}={v}", f"axis {ax.name}")
                raise
            out.append(cell)
    return out


def _regime(rows: dict[str, dict], gain: float | None) -> str:
    pdd, cdc = rows[RELAY_ARCH]["status"] == "ok", rows[LINE_BASELINE]["status"] == "ok"
    if not pdd:
        return "no_pdd"
    if not cdc:
        return "pdd_only"
    if gain is None or abs(gain) <= _TIE:
        return "same"
    return "relay_pays" if gain > 0 else "pdd_worse"


def _cell(i: int, ix: int, iy: int, xv: Any, yv: Any, res: dict) -> dict:
    rows = res["rows"]
    comp = res["comparison"]
    pdd = rows[RELAY_ARCH]
    relay_req = None
    if pdd["status"] == "ok":
        relay_req = round(pdd["route_p_rld_md"] + pdd["route_p_rld"], 4)
    gain = comp.get(GAIN_LINE)
    return {
        "index": i,
        "ix": ix,
        "iy": iy,
        "x": xv,
        "y": yv,
        "regime": _regime(rows, gain),
        GAIN_LINE: gain,
        GAIN_LOCAL: comp.get(GAIN_LOCAL),
        "relay_request_share": relay_req,
        "rld_token_share": res["rld"],
        "architectures": rows,
    }


def regime_map(
    data: dict,
    file: str,
    x: RegimeAxis,
    y: RegimeAxis,
    *,
    verify: bool = False,
    sim_requests: int = 20_000,
    executor: str | Executor = "process",
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Optimize the three architectures at every cell of x by y.

    Returns {"scenario", "verify", "x", "y", "architectures", "regimes", "cells", "counts"};
    cells[iy * len(x) + ix] is the cell at (x.values[ix], y.values[iy]). Same inputs, same
    output byte for byte, whatever the executor (results come back in cell order).
    """

    if isinstance(executor, str):
        check_executor(executor)
    cells = build_cells(data, file, x, y)
    task = functools.partial(run_cell, file=file, verify=verify, sim_requests=sim_requests)
    results = run_all(task, cells, executor, workers, progress, stop=lambda r: "error" in r)
    coords = [(ix, iy) for iy in range(len(y.values)) for ix in range(len(x.values))]
    for i, r in enumerate(results):
        if r is not None and "error" in r:
            ix, iy = coords[i]
            at = f"{x.name}={x.values[ix]}, {y.name}={y.values[iy]}"
            raise SweepPointError(f"regime cell {i} ({at}): {r['error']}", r["exit_code"])
    out = [
        _cell(i, ix, iy, x.values[ix], y.values[iy], results[i])
        for i, (ix, iy) in enumerate(coords)
    ]
    counts = {k: sum(c["regime"] == k for c in out) for k in REGIMES}
    return {
        "scenario": Scenario.model_validate(data).name,
        "verify": verify,
        "x": x.as_dict(),
        "y": y.as_dict(),
        "architectures": list(ARCHS),
        "regimes": dict(REGIMES),
        "counts": counts,
        "cells": out,
    }


__all__ = ["ARCHS", "GAIN_LINE", "GAIN_LOCAL", "REGIMES", "build_cells", "regime_map", "run_cell"]
