"""Read a request trace into arrival-sorted :class:`Requests`: :func:`read_trace`.

Formats: Mooncake JSONL (``trace_mooncake``), Azure LLM CSV (``trace_azure``) and a generic
JSONL/CSV (``trace_generic``); ``trace_reader`` detects them and streams good rows as
chunks (``trace_rows``), so a trace of millions of requests is never held as Python objects
(Mooncake lines in the release's own layout are parsed from the bytes by a compiled pass,
``trace_scan``). :func:`read_trace` then puts the chunks together: prefix-cache hits
(``trace_hits``; with infinite caches a compiled set of seen blocks, ``trace_seen``),
arrival order, and spreading of quantised timestamps (``trace_ticks``).

This module also re-exports the public names of those modules that callers import from
here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from pdd_plan.common import limits
from pdd_plan.common.errors import InputError
from pdd_plan.workload.cache import CacheSpec, EndsOnMd
from pdd_plan.workload.requests import Requests
from pdd_plan.workload.traces.hits import TraceHits
from pdd_plan.workload.traces.reader import DEFAULT_CHUNK_ROWS, FORMATS, TraceReader, detect_format
from pdd_plan.workload.traces.rows import TraceChunk
from pdd_plan.workload.traces.ticks import detect_tick, spread_ticks, tick_to_spread

__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "FORMATS",
    "TraceChunk",
    "TraceInfo",
    "TraceReader",
    "detect_format",
    "detect_tick",
    "read_trace",
    "spread_ticks",
]


@dataclass(frozen=True)
class TraceInfo:
    """What :func:`read_trace` found and did."""

    path: str
    format: str
    rows: int  # requests read (bad rows excluded)
    bad_rows: int  # rows skipped (only with skip_bad_rows=True)
    bad_lines: tuple[int, ...]  # line numbers of the first skipped rows
    has_hashes: bool  # hits were simulated from hash_ids
    sorted_in_file: bool  # the file was already in arrival order
    tick_s: float | None  # the quantisation tick whose arrivals were spread, if any
    start_wallclock: str | None  # wall-clock time of arrival 0 (Azure), if known
    cache: CacheSpec | None  # cache capacities used (hashed traces only)
    prefill_blocks_held: int | None  # blocks in the prefill cache at the end
    drc_requests: int | None  # requests that used the DRC (ended on MD)


@dataclass
class _Columns:
    """The chunks' columns in file order, and whether arrivals have been sorted so far."""

    arrival: list[np.ndarray]
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    in_order: bool = True
    latest: float = -math.inf

    def add(self, ch: TraceChunk) -> None:
        a = ch.arrival_s
        if self.in_order and (a[0] < self.latest or bool(np.any(a[1:] < a[:-1]))):
            self.in_order = False
        self.latest = max(self.latest, float(a.max()))
        self.arrival.append(a)
        self.inputs.append(ch.input_tokens)
        self.outputs.append(ch.output_tokens)


def _read_columns(reader: TraceReader, hits: TraceHits) -> _Columns:
    """One pass over the file; ``hits`` sees every chunk."""
    cols = _Columns([], [], [])
    rows, most = 0, limits.value("REQUESTS")
    for ch in reader:
        rows += len(ch.arrival_s)
        if rows > most:  # before the rows are kept: a 2 MB gzip held 25M of them
            limits.check(
                "REQUESTS",
                rows,
                str(reader.path),
                None,
                "cut the trace (its first N rows), or plan on a sample of it",
            )
        limits.check_trace_tokens(
            ch.input_tokens, ch.output_tokens, str(reader.path), ch.first_line
        )
        cols.add(ch)
        hits.add(ch, cols.in_order)
    if reader.rows == 0:
        problem = "no requests in trace"
        if reader.bad_rows:
            problem += f" ({reader.bad_rows} bad rows skipped, first at line {reader.bad_lines[0]})"
        raise InputError(str(reader.path), None, problem, "give a trace with at least one good row")
    return cols


def _start_at_zero(arrival: np.ndarray, reader: TraceReader) -> tuple[np.ndarray, float | None]:
    """Azure arrivals count from the file's first row: shift them so the earliest is 0."""
    start_wall = reader.start_wallclock_s
    if arrival[0] != 0.0 and reader.format == "azure":
        start_wall = None if start_wall is None else start_wall + float(arrival[0])
        arrival = arrival - arrival[0]
    return arrival, start_wall


def _wallclock_text(start_wall_s: float | None) -> str | None:
    if start_wall_s is None:
        return None
    return datetime.fromtimestamp(start_wall_s, tz=timezone.utc).replace(tzinfo=None).isoformat(" ")


def read_trace(
    path: str | os.PathLike,
    skip_bad_rows: bool = False,
    cache: CacheSpec | None = None,
    *,
    ends_on_md: EndsOnMd = None,
    fmt: str | None = None,
    spread: bool | float | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> tuple[Requests, TraceInfo]:
    """Read a trace into arrival-sorted :class:`Requests` plus a :class:`TraceInfo`.

    ``cache``: capacities of the prefill cache and the DRC (default: both infinite);
    used only for traces with ``hash_ids``. ``ends_on_md``: which requests end on MD and
    so use the DRC (None = all; a boolean mask or ``f(index, input, output)`` over
    arrival order; the callable should be pure, it may be called again for unsorted
    files). ``spread``: spread requests sharing a quantised tick (None = when a tick is
    detected, see :mod:`pdd_plan.workload.traces.ticks`; True = the same; False = never;
    a float = use this tick in seconds).
    Traces without hash_ids give NaN hits (generic ``hit_rate`` gives ``hit_p``).
    """
    reader = TraceReader(path, fmt=fmt, skip_bad_rows=skip_bad_rows, chunk_rows=chunk_rows)
    spec = cache or CacheSpec()
    hits = TraceHits(spec, ends_on_md)
    cols = _read_columns(reader, hits)
    n, in_order, hashed = reader.rows, cols.in_order, reader.has_hashes
    arrival = np.concatenate(cols.arrival)
    inp = np.concatenate(cols.inputs)
    out = np.concatenate(cols.outputs)
    order = np.arange(n) if in_order else np.argsort(arrival, kind="stable")
    if not in_order:
        arrival, inp, out = arrival[order], inp[order], out[order]
    hit_p, hit_d = hits.hits(order, in_order, hashed, reader, reader.chunk_rows, str(reader.path))
    arrival, start_wall = _start_at_zero(arrival, reader)
    tick = tick_to_spread(spread, arrival)
    if tick is not None:
        arrival = spread_ticks(arrival, tick)
    reqs = Requests(
        arrival_s=arrival,
        input_tokens=inp.astype(np.int64, copy=False),
        output_tokens=out.astype(np.int64, copy=False),
        hit_p=hit_p,
        hit_d=hit_d,
    )
    info = TraceInfo(
        path=str(reader.path),
        format=reader.format,
        rows=n,
        bad_rows=reader.bad_rows,
        bad_lines=tuple(reader.bad_lines),
        has_hashes=hashed,
        sorted_in_file=in_order,
        tick_s=tick,
        start_wallclock=_wallclock_text(start_wall),
        cache=spec if hashed else None,
        prefill_blocks_held=hits.prefill_blocks_held if hashed else None,
        drc_requests=int(np.count_nonzero(~np.isnan(hit_d))) if hashed and spec.drc else None,
    )
    return reqs, info
