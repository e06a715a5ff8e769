"""Parameter sweeps: optimize a scenario over a grid of values and mark the Pareto frontier.

Pure: no printing. The command line (`pdd-plan sweep`, cli/sweep.py) renders what `sweep`
returns.

* A `--vary KEY=START:STOP:STEP` is parsed by `parse_vary`: KEY is a dotted path into the scenario
  YAML (`sla.ttft_p90_s`, `prices.h200`, `datacenters.0.gpus.h100`); the values run from START
  by STEP and include STOP when it lands on the grid (within a relative 1e-9). Several give the
  Cartesian product, the first --vary outermost.
* Every point is the scenario's dict, deep-copied, with its keys set, validated through the
  Scenario schema and resolved before anything is solved, so a bad key or value fails at once as
  one InputError naming `--vary KEY`.
* Points run on any `concurrent.futures.Executor`: a process pool by default, threads, this
  process (`serial`), or a Dask cluster (`dask://HOST:PORT`: `distributed.Client(...)`'s
  executor). Results are ordered by point index whatever order they finish in, and carry no
  solver timings, so the same inputs give the same output byte for byte.
* An architecture with no plan at a point is a row with status `infeasible` and the reason; a
  point where none is feasible is such a row for every architecture, not a failure.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InfeasibleError, InputError, PddPlanError

MAX_POINTS = 10_000  # a grid beyond this is almost surely a typo in STEP
EXECUTORS = ("process", "thread", "serial", "dask://HOST:PORT")
ROUTES = ("p_md", "p_rld_md", "p_rld")
# the per-architecture figures of a row, in output order (the varied values come first)
ROW_KEYS = (
    "status",
    "cost_per_hour",
    "goodput_rps",
    "bcr",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p90_ms",
    *(f"route_{r}" for r in ROUTES),
    "gpus",
    "line",
    "pareto",
    "reason",
)
SIM_ROW_KEYS = ("sim_sla_met", "sim_ttft_p90_s", "sim_ttft_p99_s")  # with verify only
_TOL = 1e-9


class SweepPointError(PddPlanError):
    """A point failed for a reason other than infeasibility (carried back from a worker)."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self):  # picklable across processes and Dask workers
        return (SweepPointError, (str(self), self.exit_code))


# ---------------------------------------------------------------------------- --vary parsing
@dataclass(frozen=True)
class Vary:
    key: str
    start: float
    stop: float
    step: float
    values: tuple[float, ...]

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "start": self.start,
            "stop": self.stop,
            "step": self.step,
            "values": list(self.values),
        }


_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*$")
_INT_RE = re.compile(r"^[+-]?\d+$")


def _number(text: str, what: str, key: str, spec: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        raise InputError(
            None,
            f"--vary {key}",
            f"{what} '{text}' in '{spec}' is not a finite number",
            "write KEY=START:STOP:STEP with numbers, e.g. sla.ttft_p90_s=4:12:2",
        )
    return x


def parse_vary(spec: str) -> Vary:
    """`KEY=START:STOP:STEP` -> the key and its grid (STOP included when on the grid)."""
    fix = "write KEY=START:STOP:STEP, e.g. workload.rate_rps=20:60:20"
    key, sep, rng = spec.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError(None, "--vary", f"'{spec}' is not KEY=START:STOP:STEP", fix)
    if not _KEY_RE.match(key):
        raise InputError(
            None,
            f"--vary {key}",
            f"'{key}' is not a dotted key path",
            "use the YAML keys joined by dots, e.g. sla.ttft_p90_s or datacenters.0.gpus.h100",
        )
    parts = [p.strip() for p in rng.split(":")]
    if len(parts) != 3:
        raise InputError(None, f"--vary {key}", f"'{rng}' is not START:STOP:STEP", fix)
    start, stop, step = (_number(t, w, key, spec) for t, w in zip(parts, ("START", "STOP", "STEP")))
    if step <= 0:
        raise InputError(None, f"--vary {key}", f"STEP must be > 0 (got {parts[2]})", fix)
    if stop < start:
        raise InputError(
            None,
            f"--vary {key}",
            f"STOP {parts[1]} is below START {parts[0]}",
            "give START <= STOP (the values ascend by STEP)",
        )
    q = (stop - start) / step
    on_grid = abs(q - round(q)) <= _TOL * max(1.0, abs(q))
    n = round(q) if on_grid else math.floor(q)
    if n + 1 > MAX_POINTS:
        raise InputError(
            None,
            f"--vary {key}",
            f"{n + 1:,} values (at most {MAX_POINTS:,})",
            "use a larger STEP or a narrower range",
        )
    integral = all(_INT_RE.match(p) for p in parts)
    vals: list[float] = []
    for i in range(n + 1):
        v = stop if i == n and on_grid else start + i * step
        vals.append(int(round(v)) if integral else float(round(v, 12)))
    if integral:
        start, stop, step = int(start), int(stop), int(step)
    return Vary(key, start, stop, step, tuple(vals))


def grid(varies: Sequence[Vary]) -> list[tuple]:
    """The Cartesian product of the values, the first --vary outermost."""
    keys = [v.key for v in varies]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise InputError(
            None, f"--vary {dup[0]}", "given more than once", "give each key once per sweep"
        )
    pts = list(itertools.product(*(v.values for v in varies)))
    if len(pts) > MAX_POINTS:
        raise InputError(
            None,
            "--vary " + ", ".join(keys),
            f"{len(pts):,} points (at most {MAX_POINTS:,})",
            "use larger steps or fewer --vary",
        )
    return pts


# ---------------------------------------------------------------------------- points
def set_key(data: dict, key: str, value: Any) -> dict:
    """A deep copy of `data` with the dotted `key` set to `value`.

    Missing mappings along the path are created (the schema then says whether they are
    allowed); numeric parts index lists. The path may not run through a value.
    """
    out = copy.deepcopy(data)
    node: Any = out
    parts = key.split(".")
    where: list[str] = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit():
                raise InputError(
                    None,
                    f"--vary {key}",
                    f"'{'.'.join(where)}' is a list; '{part}' is not an index",
                    f"index it with a number, e.g. {'.'.join([*where, '0'])}",
                )
            idx = int(part)
            if idx >= len(node):
                raise InputError(
                    None,
                    f"--vary {key}",
                    f"'{'.'.join(where)}' has {len(node)} entries, no index {idx}",
                    f"use an index below {len(node)}",
                )
            if last:
                node[idx] = value
            else:
                node = node[idx]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        else:
            raise InputError(
                None,
                f"--vary {key}",
                f"'{'.'.join(where)}' is a value ({node!r}), not a mapping",
                f"vary '{'.'.join(where)}' itself",
            )
        where.append(part)
    return out


def _check(data: dict, file: str, keys: Sequence[str], values: Sequence) -> None:
    """Validate and resolve one point; a failure names the --vary keys and their values."""
    from pydantic import ValidationError

    from ..resolve import resolve
    from ..schema.io import validation_to_input_error
    from ..schema.scenario import Scenario

    at = ", ".join(f"{k}={v}" for k, v in zip(keys, values))
    field = "--vary " + ", ".join(keys)

    def wrapped(inner: InputError) -> InputError:
        where = inner.field or inner.file
        prefix = f"{where}: " if where and where not in keys else ""
        return InputError(None, field, f"{at}: {prefix}{inner.problem}", inner.fix)

    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        raise wrapped(validation_to_input_error(Scenario, e, file)) from None
    try:
        resolve(sc, file)
    except InputError as inner:
        raise wrapped(inner) from None


def build_points(data: dict, file: str, varies: Sequence[Vary]) -> list[dict]:
    """The validated scenario dict of every grid point, in grid order.

    A point that fails validation is retried with each of its --vary alone, so the error names
    the one key at fault; a clash only the combination makes (a P90 above the P99) names all.
    """
    from ..resolve import resolve
    from ..schema.io import parse
    from ..schema.scenario import Scenario

    resolve(parse(Scenario, data, file), file)  # the base scenario's own errors name the file
    keys = [v.key for v in varies]
    out = []
    for values in grid(varies):
        d = data
        for k, x in zip(keys, values):
            d = set_key(d, k, x)
        try:
            _check(d, file, keys, values)
        except InputError:
            for k, x in zip(keys, values):
                _check(set_key(data, k, x), file, [k], [x])
            raise
        out.append(d)
    return out


_ARCH_SPLIT = re.compile(r"; (?=(?:pdd|cdc_pd|idc_pd): )")


def _reasons(message: str, architectures: Sequence[str]) -> dict[str, str]:
    """Per-architecture reasons out of optimize's joined 'a: why; b: why' message."""
    out: dict[str, str] = {}
    for part in _ARCH_SPLIT.split(message):
        a, sep, why = part.partition(": ")
        if sep and a in architectures:
            out[a] = why
    return {a: out.get(a, message) for a in architectures}


def _row(plan: dict, verify: bool) -> dict:
    route = plan.get("route_share", {})
    line = plan.get("line")
    row = {
        "status": "ok",
        "cost_per_hour": plan["cost_per_hour"],
        "goodput_rps": plan["goodput_rps"],
        "bcr": plan["bcr"],
        "ttft_p90_s": plan["ttft_s"]["p90"],
        "ttft_p99_s": plan["ttft_s"]["p99"],
        "tpot_p90_ms": plan["tpot_ms"]["p90"],
        **{f"route_{r}": route.get(r, 0.0) for r in ROUTES},
        "gpus": sum(i["count"] * i["gpus_per_instance"] for i in plan["instances"]),
        "line": f"{line['count']}x {line['sku']}" if line else None,
        "pareto": False,
        "reason": None,
    }
    if verify:
        sim = plan.get("simulated", {})
        ttft = sim.get("ttft_s", {})
        row.update(
            {
                "sim_sla_met": sim.get("sla_met"),
                "sim_ttft_p90_s": ttft.get("p90"),
                "sim_ttft_p99_s": ttft.get("p99"),
            }
        )
    return row


def _infeasible_row(reason: str, verify: bool) -> dict:
    row: dict[str, Any] = {k: None for k in ROW_KEYS}
    row.update({"status": "infeasible", "pareto": False, "reason": reason})
    if verify:
        row.update({k: None for k in SIM_ROW_KEYS})
    return row


def run_point(data: dict, file: str, verify: bool = False, sim_requests: int = 20_000) -> dict:
    """Worker: optimize one point; {architecture: row}, or {"error": ..., "exit_code": ...}.

    Top-level and returning plain data, so process pools and Dask workers can run it; errors
    travel back as data (the project's exceptions do not all pickle).
    """
    from ..optimize import optimize
    from ..resolve import resolve
    from ..schema.io import parse
    from ..schema.scenario import Scenario

    try:
        sc = parse(Scenario, data, file)
        archs = list(sc.architectures)
        try:
            plan = optimize(resolve(sc, file), verify=verify, sim_requests=sim_requests).dump()
        except InfeasibleError as e:
            return {a: _infeasible_row(why, verify) for a, why in _reasons(str(e), archs).items()}
        out = {}
        for a in archs:
            if a in plan["plans"]:
                out[a] = _row(plan["plans"][a], verify)
            else:
                inf = plan["infeasible"].get(a)
                why = (
                    f"{a}: no plan meets the scenario: {inf['reasons'][0]['message']}"
                    if inf
                    else "no plan"
                )
                out[a] = _infeasible_row(_reasons(why, [a])[a], verify)
        return out
    except PddPlanError as e:
        return {"error": str(e), "exit_code": e.exit_code}


# ---------------------------------------------------------------------------- Pareto
def pareto_indices(points: Sequence[tuple[float, float, float]]) -> list[int]:
    """Indices of the points on the frontier of (goodput ↑, cost ↓, BCR ↑).

    A point is on it when no other point is at least as good in all three and strictly better
    in one; equal points are all on it.
    """
    if not points:
        return []
    x = np.asarray(points, dtype=float).reshape(len(points), 3) * np.array([1.0, -1.0, 1.0])
    out = []
    for i in range(len(x)):
        ge = np.all(x >= x[i], axis=1)
        gt = np.any(x > x[i], axis=1)
        if not np.any(ge & gt):
            out.append(i)
    return out


def _mark_pareto(points: list[dict], archs: Sequence[str]) -> dict[str, list[int]]:
    front: dict[str, list[int]] = {}
    for a in archs:
        idx = [p["index"] for p in points if p["architectures"][a]["status"] == "ok"]
        vals = [
            tuple(points[i]["architectures"][a][k] for k in ("goodput_rps", "cost_per_hour", "bcr"))
            for i in idx
        ]
        front[a] = [idx[j] for j in pareto_indices(vals)]
        for i in front[a]:
            points[i]["architectures"][a]["pareto"] = True
    return front


# ---------------------------------------------------------------------------- executors
def dask_address(spec: str) -> str:
    """`dask://HOST:PORT` -> `tcp://HOST:PORT`; `dask://SCHEME://...` -> `SCHEME://...`."""
    rest = spec[len("dask://") :]
    if not rest:
        raise InputError(
            None, "--executor", "no scheduler address after dask://", "use dask://HOST:PORT"
        )
    return rest if "://" in rest else f"tcp://{rest}"


def check_executor(spec: str) -> str:
    if spec in ("process", "thread", "serial") or spec.startswith("dask://"):
        if spec.startswith("dask://"):
            dask_address(spec)
        return spec
    raise InputError(
        None, "--executor", f"unknown executor '{spec}'", f"use one of {', '.join(EXECUTORS)}"
    )


def _dask_executor(spec: str):
    try:
        from distributed import Client
    except ImportError:
        raise InputError(
            None,
            "--executor",
            "Dask's distributed is not installed",
            "pip install 'pdd-plan[dask]' (or pip install 'dask[distributed]')",
        ) from None
    addr = dask_address(spec)
    try:
        client = Client(addr, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise InputError(
            None,
            "--executor",
            f"cannot reach the Dask scheduler at {addr}: {type(e).__name__}: {e}".rstrip(": "),
            "start one (dask scheduler; dask worker HOST:PORT) or check the address",
        ) from None
    return client, client.get_executor(pure=False)


def _mp_context():
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


@contextlib.contextmanager
def _keep_stdout():
    """Restore file descriptor 1 afterwards: the solver's stdout silencing (optimize/model.py)
    swaps fd 1 per solve, and concurrent solves in threads can leave it pointing at /dev/null."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no real fd 1 (e.g. a captured stdout): nothing to guard
        yield
        return
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _run_all(
    points: list[dict],
    file: str,
    verify: bool,
    sim_requests: int,
    ex: Executor,
    progress: Callable[[int, int], None] | None,
) -> list[dict]:
    results: list[dict | None] = [None] * len(points)
    futs: dict[Future, int] = {
        ex.submit(run_point, d, file, verify, sim_requests): i for i, d in enumerate(points)
    }
    pending = set(futs)
    done_n = 0
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=futs.__getitem__):
                results[futs[f]] = f.result()
                done_n += 1
            if progress is not None:
                progress(done_n, len(points))
            if any(r is not None and "error" in r for r in results):
                break
    finally:
        for f in pending:
            f.cancel()
    return results  # type: ignore[return-value]


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
    from ..schema.scenario import Scenario

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
    if isinstance(executor, str):
        check_executor(executor)
    scenarios = build_points(data, file, varies)
    base = Scenario.model_validate(data)
    archs = list(base.architectures)
    n = len(scenarios)
    n_workers = min(n, workers or os.cpu_count() or 1)

    results: list[dict]
    if isinstance(executor, Executor):
        results = _run_all(scenarios, file, verify, sim_requests, executor, progress)
    elif executor == "serial" or (executor in ("process", "thread") and n_workers == 1):
        results = []
        for i, d in enumerate(scenarios):
            results.append(run_point(d, file, verify, sim_requests))
            if progress is not None:
                progress(i + 1, n)
            if "error" in results[-1]:
                break
    elif executor.startswith("dask://"):
        client, ex = _dask_executor(executor)
        try:
            results = _run_all(scenarios, file, verify, sim_requests, ex, progress)
        finally:
            client.close()
    else:
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

        if executor == "process":
            # not fork: a parent that has solved before holds HiGHS's thread pool, which a forked
            # child inherits as a spinning, threadless copy
            pool: Executor = ProcessPoolExecutor(max_workers=n_workers, mp_context=_mp_context())
        else:
            pool = ThreadPoolExecutor(max_workers=n_workers)
        try:
            with _keep_stdout() if executor == "thread" else contextlib.nullcontext():
                results = _run_all(scenarios, file, verify, sim_requests, pool, progress)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    values = grid(varies)
    for i, r in enumerate(results):
        if r is not None and "error" in r:
            at = ", ".join(f"{v.key}={x}" for v, x in zip(varies, values[i]))
            raise SweepPointError(f"sweep point {i} ({at}): {r['error']}", r["exit_code"])

    points = [
        {
            "index": i,
            "values": {v.key: x for v, x in zip(varies, values[i])},
            "architectures": {a: results[i][a] for a in archs},
        }
        for i in range(n)
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


def rows(result: dict) -> list[dict]:
    """One flat row per (point, architecture), in point then architecture order."""
    keys = [v["key"] for v in result["vary"]]
    out = []
    for p in result["points"]:
        for a in result["architectures"]:
            r = p["architectures"][a]
            row = {"point": p["index"], **{k: p["values"][k] for k in keys}, "architecture": a}
            row.update({k: r.get(k) for k in columns(result)[len(keys) + 2 :]})
            out.append(row)
    return out


def columns(result: dict) -> list[str]:
    """The column order of `rows` (deterministic: point, varied keys, architecture, figures)."""
    keys = [v["key"] for v in result["vary"]]
    extra = list(SIM_ROW_KEYS) if result.get("verify") else []
    return ["point", *keys, "architecture", *ROW_KEYS[:-1], *extra, "reason"]


__all__ = [
    "Vary",
    "parse_vary",
    "grid",
    "set_key",
    "build_points",
    "run_point",
    "pareto_indices",
    "sweep",
    "rows",
    "columns",
    "SweepPointError",
]
