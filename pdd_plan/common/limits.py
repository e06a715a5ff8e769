"""Every size a user controls, bounded in one place, and the optimizer's wall-clock deadline.

Each limit is checked before the work (or the allocation) it bounds, and a value over it is a
one-line InputError (exit 2) naming the field or flag, the limit and how to raise it. The
values sit far above any real deployment; they exist so a typo (`samples: 2e9`,
`--chunk 1`) fails in a millisecond rather than hanging or exhausting memory.

Raising a limit: set the environment variable `PDD_PLAN_MAX_<NAME>` (e.g.
`PDD_PLAN_MAX_REQUESTS=50000000`) to a positive integer. It is read on every check, so one
shell or one test can change it without touching the code. README's "bad input" section lists
the same table (tests/unit/common/test_limits.py checks they agree).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pdd_plan.common.errors import InputError


@dataclass(frozen=True)
class Limit:
    name: str  # the suffix of PDD_PLAN_MAX_<NAME>
    default: int
    unit: str
    applies_to: str  # the fields and flags it bounds
    why: str  # what grows with it, and why the default is generous

    @property
    def env(self) -> str:
        return f"PDD_PLAN_MAX_{self.name}"


LIMITS: dict[str, Limit] = {
    lim.name: lim
    for lim in (
        Limit(
            "REQUESTS",
            10_000_000,
            "requests",
            "workload.samples, a trace's rows (counted as read, compressed or not), "
            "--sim-requests (optimize, sweep, report, regimes), simulate and evaluate --requests",
            "memory and replay time grow with it (samples: 2e9 used 23 GB before it was killed)",
        ),
        Limit(
            "TOKENS",
            10_000_000,
            "tokens",
            "workload.input_tokens / output_tokens, trace rows, perf/bathtub --input-tokens, "
            "engine.max_num_tokens",
            "above any model's context window; prefill loops run once per chunk",
        ),
        Limit(
            "PREFILL_PASSES",
            20_000,
            "prefill passes",
            "perf / bathtub: input tokens / --chunk (bathtub: summed over its 100 hit rates)",
            "each pass is its own roofline evaluation (~0.2 ms); 10M tokens at --chunk 1: 10M passes",
        ),
        Limit(
            "BATCH",
            1_000_000,
            "requests",
            "perf --batch, engine.max_running_requests / cuda_graph_max_batch",
            "a decode step evaluates one context per request; no instance holds a million",
        ),
        Limit(
            "CLASSES",
            1_000,
            "classes",
            "workload.classes",
            "the MILP has variables per class x path x line option",
        ),
        Limit(
            "LINES",
            16,
            "lines",
            "link.max_lines, a fleet's line.count",
            "line options = count x SKU x utilization level (rate free: 4 lines 9 s, 32 lines 137 s)",
        ),
        Limit(
            "LINE_CANDIDATES",
            32,
            "SKUs",
            "link.candidates",
            "line options multiply with link.max_lines and utilization levels",
        ),
        Limit(
            "SEARCH_STEPS",
            64,
            "values",
            "search.utilization_levels (entries), search.max_prefill_extra, search.parallelisms",
            "each value is one more enumerated combination (one MILP) per prefill choice",
        ),
        Limit(
            "GPUS",
            10_000_000,
            "GPUs",
            "datacenters[].gpus (each GPU type)",
            "pool-size ranges are enumerated up to the GPUs available",
        ),
        Limit(
            "PLAN_INSTANCES",
            10_000,
            "instances",
            "a plan's or a scenario fleet's instances[].count, summed per architecture (and its "
            "line count)",
            "simulate and emit work per instance (2 x 100,000 took 80 s and 256 MB of scripts)",
        ),
        Limit(
            "YAML_DEPTH",
            200,
            "levels",
            "nesting of any YAML input (scenario, plan, profile, fleet)",
            "the loader builds nodes recursively: a few thousand `[` overflow the C stack; real "
            "files nest under 15 levels",
        ),
        Limit(
            "YAML_NODES",
            2_000_000,
            "values",
            "values in any YAML input once its aliases (*name) are expanded",
            "nine levels of `&a [*b, *b, ...]` are 1 KB of text and 9^9 values once read; real "
            "files hold under 10^5",
        ),
        Limit(
            "PERIODS",
            1_440,
            "periods",
            "workload.periods (entries), the periods workload.periods_from_trace cuts",
            "the day's MILP has every variable and row once per period (a minute each: 1,440)",
        ),
        Limit(
            "DRAWS",
            1_000,
            "draws",
            "uncertainty.draws, optimize --draws",
            "every draw re-evaluates each plan's SLA goodput (about 0.1 s per draw and "
            "architecture); a few hundred settle a probability to a few percent",
        ),
        Limit(
            "CONFIRM",
            64,
            "replays",
            "optimize --verify-draws",
            "each verified draw is a simulator replay per architecture, not an analytic draw: 8 "
            "added 1.4 s of CPU to the default's optimize, so 1,000 ran past a minute",
        ),
        Limit(
            "NUMBER_DIGITS",
            20,
            "digits",
            "the whole part of any number read from a JSON or CSV input (iperf3 runs, engine "
            "result files, HF configs, traces)",
            "20 digits hold any 64-bit id or nanosecond timestamp; a 401-digit integer overflows "
            "the float arithmetic every reader does",
        ),
        Limit(
            "FACTOR_SPREAD",
            100,
            "x",
            "uncertainty: every factor input's 0.1% and 99.9% quantiles lie within "
            "[1/N, N] x nominal",
            "a lognormal sigma of 800 draws factors of 1e-300 and 1e300 (an inf tornado row); "
            "a spread wider than 100x is not a forecast",
        ),
        Limit(
            "SWEEP_POINTS",
            2_000,
            "points",
            "sweep: the product of the --vary value counts",
            "each point is a full optimize (seconds to minutes)",
        ),
    )
}


def value(name: str) -> int:
    """The limit in force: its `PDD_PLAN_MAX_<NAME>` environment variable, or the default."""
    lim = LIMITS[name]
    raw = os.environ.get(lim.env)
    if raw is None or not raw.strip():
        return lim.default
    try:
        v = int(float(raw))
    except (ValueError, OverflowError):
        v = 0
    if v < 1:
        raise InputError(
            None,
            lim.env,
            f"'{raw}' is not a positive integer",
            f"unset it or give e.g. {lim.default}",
        )
    return v


def exceeded(name: str, got: float) -> str:
    """The problem text of a value over the limit (for validators that raise ValueError)."""
    lim = LIMITS[name]
    n = value(name)
    return f"{_shown(got)} {lim.unit} is over the limit of {n:,} ({lim.why}); {raise_hint(name)}"


def _shown(got: float) -> str:
    """A count as a user reads it: digits grouped, or 3 figures once it has more than 15."""
    return f"{got:,.0f}" if abs(got) < 1e15 else f"{got:.3g}"


def raise_hint(name: str) -> str:
    return f"to go higher set {LIMITS[name].env}"


def check(
    name: str, got: float, file: str | None, field: str | None, fix: str | None = None
) -> None:
    """InputError naming `field` (a scenario key or a flag) when `got` is over limit `name`;
    `fix` says how to get under it when that is not "use at most N"."""
    n = value(name)
    if not got <= n:  # NaN fails too
        lim = LIMITS[name]
        raise InputError(
            file,
            field,
            f"{_shown(got)} {lim.unit} is over the limit of {n:,} ({lim.why})",
            f"{fix or f'use at most {n:,}'}, or set {lim.env}=N to raise the limit",
        )


def check_trace_tokens(inputs: Any, outputs: Any, file: str, first_line: int) -> None:
    """A chunk of trace rows (token-count arrays, the first row at `first_line`) under the
    TOKENS limit; the error names the first row over it. Vectorized: one pass per chunk."""
    import numpy as np  # the trace readers only: `pdd-plan --help` starts without numpy

    n = value("TOKENS")
    for what, col in (("input_tokens", inputs), ("output_tokens", outputs)):
        over = np.flatnonzero(~(np.asarray(col) <= n))
        if over.size:
            k = int(over[0])
            raise InputError(
                file,
                f"line {first_line + k} {what}",
                f"{float(col[k]):,.0f} tokens is over the limit of {n:,} ({LIMITS['TOKENS'].why})",
                f"fix the row (or skip it), or set {LIMITS['TOKENS'].env}=N to raise the limit",
            )


def prefill_passes(tokens: float, chunk: float) -> int:
    """Chunked-prefill passes a prompt of `tokens` new tokens takes at `chunk` per pass."""
    return max(int(math.ceil(tokens / max(chunk, 1.0))), 1)


# -- the optimizer's deadline ------------------------------------------------------------------


@dataclass(frozen=True)
class Deadline:
    """Wall-clock end of one architecture's search (`search.time_limit_s`)."""

    seconds: float
    end: float  # time.monotonic() value
    file: str | None
    what: str

    def left(self) -> float:
        return self.end - time.monotonic()


_DEADLINE: ContextVar[Deadline | None] = ContextVar("pdd_plan_deadline", default=None)


@contextlib.contextmanager
def deadline(
    seconds: float, file: str | None, what: str, started: float | None = None
) -> Iterator[Deadline]:
    """Within the block, `solver_seconds` and `check_deadline` hold the search to `seconds`
    from `started` (a `time.monotonic()` value; default now: a search resumed in steps passes
    its first step's). Inside another deadline block the outer one stands (one architecture's
    planning, its verification rounds included, shares one limit). A context variable, so
    thread-pool sweep points each keep their own."""
    outer = _DEADLINE.get()
    if outer is not None:
        yield outer
        return
    t0 = time.monotonic() if started is None else started
    d = Deadline(float(seconds), t0 + float(seconds), file, what)
    token = _DEADLINE.set(d)
    try:
        yield d
    finally:
        _DEADLINE.reset(token)


def check_deadline() -> None:
    """InputError naming search.time_limit_s once the search has run past it."""
    d = _DEADLINE.get()
    if d is not None and d.left() <= 0:
        raise time_limit_error(d)


def time_limit_error(d: Deadline) -> InputError:
    return InputError(
        d.file,
        "search.time_limit_s",
        f"{d.what} ran past the time limit of {d.seconds:g} s",
        "raise search.time_limit_s, or shrink the search (fewer link.candidates, a smaller "
        "link.max_lines, workload.classes or search.utilization_levels)",
    )


def solver_seconds(time_limit_s: float) -> float:
    """What one MILP may take: `time_limit_s`, or less when the deadline is nearer. Raises the
    time-limit error when nothing is left (a MILP cut off at its limit is not an answer)."""
    d = _DEADLINE.get()
    if d is None:
        return time_limit_s
    left = d.left()
    if left <= 0:
        raise time_limit_error(d)
    return min(time_limit_s, left)


def timed_out() -> bool:
    """Whether a deadline is set and has passed (a MILP that stopped early ran out of it)."""
    d = _DEADLINE.get()
    return d is not None and d.left() <= 0


__all__ = [
    "LIMITS",
    "Limit",
    "value",
    "check",
    "exceeded",
    "check_trace_tokens",
    "prefill_passes",
    "deadline",
    "check_deadline",
    "solver_seconds",
    "timed_out",
]
