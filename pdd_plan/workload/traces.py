"""Streaming request-trace readers: Mooncake JSONL, Azure LLM CSV, and a generic format.

Formats (detected from the extension plus the header or first record; ``.gz`` is
decompressed transparently; ``fmt=`` overrides detection):

``mooncake`` (JSONL, Mooncake FAST'25 release)
    ``{"timestamp": ms since trace start, "input_length": int, "output_length": int,
    "hash_ids": [int, ...]}``; ``hash_ids`` are prefix-block ids of 512-token blocks.
    If the first record has no ``hash_ids``, none are read and hits are NaN.

``azure`` (CSV, Azure LLM inference trace 2023)
    header ``TIMESTAMP,ContextTokens,GeneratedTokens``; ``TIMESTAMP`` is a wall-clock
    string such as ``2023-11-16 18:17:03.9799600``, converted to seconds from the first
    row (shifted so the earliest arrival is 0 if the file is not sorted). No hits (NaN).

``generic_jsonl`` / ``generic_csv``
    one request per line/row with ``arrival_s`` (seconds from trace start, finite,
    >= 0), ``input_tokens`` (int >= 1), ``output_tokens`` (int >= 0) and optional
    ``hit_rate`` (prefill-side cached fraction of the input, in [0, 1]; missing,
    ``null`` or an empty cell means unknown). Other keys/columns are ignored.
    ``hit_rate`` becomes ``hit_p``; ``hit_d`` is NaN (unknown).

Readers yield :class:`TraceChunk` objects of at most ``chunk_rows`` rows, so a trace of
millions of requests is never held as Python objects. :func:`read_trace` computes the
prefix-cache hits (prefill cache and MD-side DRC, see :mod:`pdd_plan.workload.cache`)
while streaming and drops ``hash_ids`` chunk by chunk. If a hashed trace is not in
arrival order, the file is read a second time and its hash ids (compact int64 arrays)
are replayed in stable arrival order.

Tick spreading: the Mooncake conversation trace has timestamps quantised to ~3 s ticks
(1,180 distinct values for 12,031 requests). When a trace looks quantised (at most half
of the arrivals are distinct and >= 90% of the steps between distinct values are whole
multiples, within 1%, of their median step), the ``c`` requests sharing a tick value
``t`` get ``t + j * w / c`` for ``j = 0..c-1`` in order of appearance, where
``w = min(next distinct value - t, tick)``. This is deterministic and keeps the order.

Bad rows (bad JSON, missing field, wrong type, negative length, ...) raise
:class:`~pdd_plan.errors.InputError` naming ``file:line`` and the field; with
``skip_bad_rows=True`` they are skipped and counted instead.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import chain
from pathlib import Path
from typing import IO

import numpy as np

from pdd_plan.errors import InputError
from pdd_plan.workload.cache import CacheSimulator, CacheSpec, EndsOnMd
from pdd_plan.workload.requests import Requests

FORMATS = ("mooncake", "azure", "generic_jsonl", "generic_csv")
DEFAULT_CHUNK_ROWS = 65_536
_MAX_BAD_LINES_KEPT = 20

_MOONCAKE_FIX = (
    'each line must be {"timestamp": ms, "input_length": int, "output_length": int, '
    '"hash_ids": [int, ...]}'
)
_AZURE_FIX = (
    "each row must be TIMESTAMP (YYYY-MM-DD HH:MM:SS.fffffff),ContextTokens,GeneratedTokens"
)
_GENERIC_FIX = (
    "each request needs arrival_s (s >= 0), input_tokens (int >= 1), "
    "output_tokens (int >= 0), optional hit_rate in [0, 1]"
)
_GENERIC_KEYS = ("arrival_s", "input_tokens", "output_tokens")
_AZURE_KEYS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


@dataclass(frozen=True)
class TraceChunk:
    """Up to ``chunk_rows`` consecutive good rows of a trace, in file order."""

    first_line: int  # line number of the first row in this chunk (1-based)
    arrival_s: np.ndarray  # float64
    input_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    hit_rate: np.ndarray | None  # float64 (NaN = unknown); generic formats only
    hash_ids: list[list[int]] | None  # Mooncake with hashes only

    def __len__(self) -> int:
        return int(self.input_tokens.shape[0])


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


class _BadRow(Exception):
    def __init__(self, field: str | None, problem: str, fix: str):
        super().__init__(problem)
        self.field, self.problem, self.fix = field, problem, fix


# --------------------------------------------------------------------------- parsing


def _int(v: object, field: str, minimum: int, fix: str) -> int:
    if type(v) is int:
        x = v
    elif type(v) is float and v.is_integer():
        x = int(v)
    elif type(v) is str:
        s = v.strip()
        try:
            x = int(s)
        except ValueError:
            try:
                f = float(s)
            except ValueError:
                raise _BadRow(field, f"not a number: {v!r}", fix) from None
            if not f.is_integer():
                raise _BadRow(field, f"not a whole number: {v!r}", fix) from None
            x = int(f)
    else:
        raise _BadRow(field, f"not an integer: {v!r}", fix)
    if x < minimum:
        what = "negative" if x < 0 else "too small"
        raise _BadRow(field, f"{what} value {x} (must be >= {minimum})", fix)
    return x


def _float(v: object, field: str, fix: str) -> float:
    if type(v) is float or type(v) is int:
        x = float(v)
    elif type(v) is str:
        try:
            x = float(v)
        except ValueError:
            raise _BadRow(field, f"not a number: {v!r}", fix) from None
    else:
        raise _BadRow(field, f"not a number: {v!r}", fix)
    if not math.isfinite(x):
        raise _BadRow(field, f"not finite: {v!r}", fix)
    return x


def _hit(v: object, fix: str) -> float:
    if v is None or (type(v) is str and not v.strip()):
        return math.nan
    x = _float(v, "hit_rate", fix)
    if not 0.0 <= x <= 1.0:
        raise _BadRow("hit_rate", f"value {x} outside [0, 1]", fix)
    return x


_FRACTION = re.compile(r"(.*\d\d:\d\d:\d\d)\.(\d+)(.*)")
_EPOCH = datetime(1970, 1, 1)


def _wallclock_s(text: str) -> float:
    """Seconds since 1970 (naive times taken as they are, aware ones as UTC)."""
    s = text.strip()
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        m = _FRACTION.fullmatch(s)  # Python < 3.11 wants exactly 3 or 6 fraction digits
        if not m:
            raise _BadRow("TIMESTAMP", f"not a date-time: {text!r}", _AZURE_FIX) from None
        try:
            dt = datetime.fromisoformat(f"{m[1]}.{m[2][:6].ljust(6, '0')}{m[3]}")
        except ValueError:
            raise _BadRow("TIMESTAMP", f"not a date-time: {text!r}", _AZURE_FIX) from None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return (dt - _EPOCH).total_seconds()


def _open_binary(path: Path) -> IO[bytes]:
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _base_suffix(path: Path) -> str:
    p = path.with_suffix("") if path.suffix.lower() == ".gz" else path
    return p.suffix.lower()


def detect_format(path: str | os.PathLike) -> str:
    """One of :data:`FORMATS`, from the extension and the header or first record."""
    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), None, "trace file not found", "check the path")
    try:
        with _open_binary(p) as f:
            line_no, first = next(
                ((k, raw) for k, raw in enumerate(f, start=1) if raw.strip()), (0, b"")
            )
    except (OSError, EOFError) as e:
        raise InputError(str(p), None, f"cannot read trace: {e}", "check the file") from None
    if not first:
        raise InputError(str(p), None, "trace file is empty", "give a file with requests")
    ext = _base_suffix(p)
    looks_json = first.lstrip().startswith(b"{")
    if ext in (".jsonl", ".ndjson", ".json") or (ext != ".csv" and looks_json):
        try:
            rec = json.loads(first)
        except ValueError as e:
            raise InputError(
                f"{p}:{line_no}", None, f"first record is not JSON ({e})", _MOONCAKE_FIX
            ) from None
        if isinstance(rec, dict):
            if "input_length" in rec:
                return "mooncake"
            if "input_tokens" in rec and "arrival_s" in rec:
                return "generic_jsonl"
        keys = sorted(rec) if isinstance(rec, dict) else type(rec).__name__
        raise InputError(
            f"{p}:{line_no}",
            None,
            f"unrecognised JSONL record (keys {keys})",
            "use Mooncake keys timestamp/input_length/output_length/hash_ids or generic "
            "keys arrival_s/input_tokens/output_tokens[/hit_rate]",
        )
    header = [c.strip() for c in next(csv.reader([first.decode("utf-8", "replace")]))]
    if all(k in header for k in _AZURE_KEYS):
        return "azure"
    if all(k in header for k in _GENERIC_KEYS):
        return "generic_csv"
    raise InputError(
        f"{p}:{line_no}",
        None,
        f"unrecognised CSV header {header}",
        "use TIMESTAMP,ContextTokens,GeneratedTokens (Azure) or "
        "arrival_s,input_tokens,output_tokens[,hit_rate] (generic)",
    )


# --------------------------------------------------------------------------- reader


class TraceReader:
    """Iterate a trace file as :class:`TraceChunk` objects.

    After iterating, ``rows``, ``bad_rows``, ``bad_lines``, ``has_hashes`` and (Azure)
    ``start_wallclock_s`` describe what was read. Iterating again re-reads the file.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        fmt: str | None = None,
        skip_bad_rows: bool = False,
        chunk_rows: int = DEFAULT_CHUNK_ROWS,
    ):
        self.path = Path(path)
        if fmt is None:
            fmt = detect_format(self.path)
        elif fmt not in FORMATS:
            raise InputError(
                str(self.path), "format", f"unknown trace format {fmt!r}", f"use one of {FORMATS}"
            )
        elif not self.path.is_file():
            raise InputError(str(self.path), None, "trace file not found", "check the path")
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be >= 1")
        self.format = fmt
        self.skip_bad_rows = skip_bad_rows
        self.chunk_rows = int(chunk_rows)
        self.rows = 0
        self.bad_rows = 0
        self.bad_lines: list[int] = []
        self.has_hashes = False
        self.start_wallclock_s: float | None = None

    # -- bookkeeping

    def _bad(self, line_no: int, err: _BadRow) -> None:
        if not self.skip_bad_rows:
            raise InputError(f"{self.path}:{line_no}", err.field, err.problem, err.fix) from None
        self.bad_rows += 1
        if len(self.bad_lines) < _MAX_BAD_LINES_KEPT:
            self.bad_lines.append(line_no)

    def __iter__(self) -> Iterator[TraceChunk]:
        self.rows = self.bad_rows = 0
        self.bad_lines = []
        if self.format in ("mooncake", "generic_jsonl"):
            yield from self._iter_jsonl()
        else:
            yield from self._iter_csv()

    def _chunk(self, first_line, arr, inp, out, hit, hashes) -> TraceChunk:
        self.rows += len(inp)
        return TraceChunk(
            first_line=first_line,
            arrival_s=np.asarray(arr, dtype=np.float64),
            input_tokens=np.asarray(inp, dtype=np.int64),
            output_tokens=np.asarray(out, dtype=np.int64),
            hit_rate=None if hit is None else np.asarray(hit, dtype=np.float64),
            hash_ids=hashes,
        )

    # -- JSONL

    def _iter_jsonl(self) -> Iterator[TraceChunk]:
        mooncake = self.format == "mooncake"
        fix = _MOONCAKE_FIX if mooncake else _GENERIC_FIX
        k_t, k_in, k_out = (
            ("timestamp", "input_length", "output_length") if mooncake else _GENERIC_KEYS
        )
        scale = 1e-3 if mooncake else 1.0
        n_chunk = self.chunk_rows
        hashes_known: bool | None = None if mooncake else False
        arr: list[float] = []
        inp: list[int] = []
        out: list[int] = []
        hit: list[float] | None = None if mooncake else []
        hashes: list[list[int]] | None = None
        first_line = 0
        with _open_binary(self.path) as f:
            for line_no, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                try:
                    try:
                        rec = json.loads(raw)
                    except ValueError as e:
                        raise _BadRow(None, f"bad JSON ({e})", fix) from None
                    if type(rec) is not dict:
                        raise _BadRow(None, f"record is a {type(rec).__name__}, not an object", fix)
                    try:
                        t, i, o = rec[k_t], rec[k_in], rec[k_out]
                    except KeyError as e:
                        raise _BadRow(e.args[0], "missing", fix) from None
                    t = _float(t, k_t, fix) * scale
                    if t < 0:
                        raise _BadRow(k_t, f"negative value {t / scale}", fix)
                    i = _int(i, k_in, 1, fix)
                    o = _int(o, k_out, 0, fix)
                    if mooncake:
                        if hashes_known is None:
                            hashes_known = self.has_hashes = "hash_ids" in rec
                            hashes = [] if hashes_known else None
                        if hashes_known:
                            h = rec.get("hash_ids")
                            if h is None:
                                raise _BadRow("hash_ids", "missing", fix)
                            if type(h) is not list or not all(type(x) is int for x in h):
                                raise _BadRow("hash_ids", "not a list of integers", fix)
                    else:
                        hv = _hit(rec.get("hit_rate"), fix)
                except _BadRow as err:
                    self._bad(line_no, err)
                    continue
                if not inp:
                    first_line = line_no
                arr.append(t)
                inp.append(i)
                out.append(o)
                if hashes is not None:
                    hashes.append(h)
                if hit is not None:
                    hit.append(hv)
                if len(inp) >= n_chunk:
                    yield self._chunk(first_line, arr, inp, out, hit, hashes)
                    arr, inp, out = [], [], []
                    hit = None if hit is None else []
                    hashes = None if hashes is None else []
        if inp:
            yield self._chunk(first_line, arr, inp, out, hit, hashes)

    # -- CSV

    def _iter_csv(self) -> Iterator[TraceChunk]:
        azure = self.format == "azure"
        fix = _AZURE_FIX if azure else _GENERIC_FIX
        keys = _AZURE_KEYS if azure else _GENERIC_KEYS
        n_chunk = self.chunk_rows
        arr: list[float] = []
        inp: list[int] = []
        out: list[int] = []
        hit: list[float] | None = None if azure else []
        first_line = 0
        t0: float | None = None
        with _open_binary(self.path) as f:
            lines = (raw.decode("utf-8", "replace") for raw in f)
            reader = csv.reader(lines)
            header: list[str] | None = None
            for row in reader:
                line_no = reader.line_num
                if not row or all(not c.strip() for c in row):
                    continue
                if header is None:
                    header = [c.strip() for c in row]
                    missing = [k for k in keys if k not in header]
                    if missing:
                        raise InputError(
                            f"{self.path}:{line_no}", None, f"header lacks columns {missing}", fix
                        )
                    ix = [header.index(k) for k in keys]
                    ih = header.index("hit_rate") if (not azure and "hit_rate" in header) else None
                    width = max(ix + ([ih] if ih is not None else [])) + 1
                    continue
                try:
                    if len(row) < width:
                        raise _BadRow(None, f"{len(row)} columns, expected {len(header)}", fix)
                    tv, iv, ov = row[ix[0]], row[ix[1]], row[ix[2]]
                    if azure:
                        t = _wallclock_s(tv)
                    else:
                        t = _float(tv, keys[0], fix)
                        if t < 0:
                            raise _BadRow(keys[0], f"negative value {t}", fix)
                    i = _int(iv, keys[1], 1, fix)
                    o = _int(ov, keys[2], 0, fix)
                    hv = _hit(row[ih], fix) if ih is not None else math.nan
                except _BadRow as err:
                    self._bad(line_no, err)
                    continue
                if azure:  # seconds from the first good row
                    if t0 is None:
                        t0 = self.start_wallclock_s = t
                    t -= t0
                if not inp:
                    first_line = line_no
                arr.append(t)
                inp.append(i)
                out.append(o)
                if hit is not None:
                    hit.append(hv)
                if len(inp) >= n_chunk:
                    yield self._chunk(first_line, arr, inp, out, hit, None)
                    arr, inp, out = [], [], []
                    hit = None if hit is None else []
        if inp:
            yield self._chunk(first_line, arr, inp, out, hit, None)


# --------------------------------------------------------------------------- ticks


def detect_tick(arrival_s: np.ndarray) -> float | None:
    """The quantisation tick of sorted arrivals, or None if they do not look quantised."""
    a = np.asarray(arrival_s, dtype=np.float64)
    if a.shape[0] < 4:
        return None
    distinct = np.unique(a)
    if distinct.shape[0] < 2 or distinct.shape[0] > a.shape[0] // 2:
        return None
    steps = np.diff(distinct)
    tick = float(np.median(steps))
    if tick <= 0:
        return None
    ratio = steps / tick
    whole = np.abs(ratio - np.rint(ratio)) <= 0.01 * np.maximum(np.rint(ratio), 1)
    return tick if float(np.mean(whole)) >= 0.9 else None


def spread_ticks(arrival_s: np.ndarray, tick_s: float) -> np.ndarray:
    """Spread requests sharing a tick value evenly inside the tick (sorted input)."""
    a = np.asarray(arrival_s, dtype=np.float64)
    if a.shape[0] == 0:
        return a.copy()
    uniq, start, count = np.unique(a, return_index=True, return_counts=True)
    nxt = np.append(uniq[1:], uniq[-1] + tick_s)
    width = np.minimum(nxt - uniq, tick_s)
    rank = np.arange(a.shape[0]) - np.repeat(start, count)
    return a + rank / np.repeat(count, count) * np.repeat(width, count)


# --------------------------------------------------------------------------- read_trace


def _replay_sorted(reader: TraceReader, order: np.ndarray, sim: CacheSimulator, n: int):
    """Second pass for unsorted hashed traces: compact hash ids, replay in arrival order."""
    counts: list[np.ndarray] = []
    flats: list[np.ndarray] = []
    inp_all: list[np.ndarray] = []
    out_all: list[np.ndarray] = []
    for ch in reader:
        assert ch.hash_ids is not None
        counts.append(np.fromiter((len(h) for h in ch.hash_ids), np.int64, len(ch)))
        flat = list(chain.from_iterable(ch.hash_ids))
        try:
            flats.append(np.array(flat, dtype=np.int64))
        except OverflowError:
            flats.append(np.array(flat, dtype=object))
        inp_all.append(ch.input_tokens)
        out_all.append(ch.output_tokens)
    cnt = np.concatenate(counts)
    if cnt.shape[0] != n:  # the file changed between the two passes
        raise InputError(str(reader.path), None, "trace changed while being read", "read it again")
    dtype = object if any(f.dtype == object for f in flats) else np.int64
    flat = np.concatenate([f.astype(dtype) for f in flats])
    off = np.concatenate(([0], np.cumsum(cnt)))
    inp = np.concatenate(inp_all)[order]
    out = np.concatenate(out_all)[order]
    hit_p = np.empty(n)
    hit_d = np.empty(n)
    step = reader.chunk_rows
    for s in range(0, n, step):
        idx = order[s : s + step]
        ids = [flat[off[j] : off[j + 1]].tolist() for j in idx]
        hit_p[s : s + step], hit_d[s : s + step] = sim.process(
            ids, inp[s : s + step], out[s : s + step]
        )
    return hit_p, hit_d


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
    detected, see the module doc; True = the same; False = never; a float = use this
    tick in seconds).
    Traces without hash_ids give NaN hits (generic ``hit_rate`` gives ``hit_p``).
    """
    reader = TraceReader(path, fmt=fmt, skip_bad_rows=skip_bad_rows, chunk_rows=chunk_rows)
    spec = cache or CacheSpec()
    sim = CacheSimulator(spec, ends_on_md)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("a", "i", "o", "h", "hp", "hd")}
    in_order = True
    last = -math.inf
    for ch in reader:
        a = ch.arrival_s
        if in_order and (a[0] < last or bool(np.any(a[1:] < a[:-1]))):
            in_order = False
        last = max(last, float(a.max()))
        parts["a"].append(a)
        parts["i"].append(ch.input_tokens)
        parts["o"].append(ch.output_tokens)
        if ch.hit_rate is not None:
            parts["h"].append(ch.hit_rate)
        if ch.hash_ids is not None and in_order:
            hp, hd = sim.process(ch.hash_ids, ch.input_tokens, ch.output_tokens)
            parts["hp"].append(hp)
            parts["hd"].append(hd)
    n = reader.rows
    if n == 0:
        problem = "no requests in trace"
        if reader.bad_rows:
            problem += f" ({reader.bad_rows} bad rows skipped, first at line {reader.bad_lines[0]})"
        raise InputError(str(reader.path), None, problem, "give a trace with at least one good row")
    arrival = np.concatenate(parts["a"])
    inp = np.concatenate(parts["i"])
    out = np.concatenate(parts["o"])
    order = np.arange(n) if in_order else np.argsort(arrival, kind="stable")
    if not in_order:
        arrival, inp, out = arrival[order], inp[order], out[order]
    if reader.has_hashes:
        if in_order:
            hit_p, hit_d = np.concatenate(parts["hp"]), np.concatenate(parts["hd"])
        else:
            sim = CacheSimulator(spec, ends_on_md)
            hit_p, hit_d = _replay_sorted(reader, order, sim, n)
    else:
        hit_p = np.concatenate(parts["h"])[order] if parts["h"] else np.full(n, np.nan)
        hit_d = np.full(n, np.nan)
    start_wall = reader.start_wallclock_s
    if arrival[0] != 0.0 and reader.format == "azure":
        start_wall = None if start_wall is None else start_wall + float(arrival[0])
        arrival = arrival - arrival[0]
    tick: float | None = None
    if spread is None or spread is True:
        tick = detect_tick(arrival)
    elif spread is not False:
        tick = float(spread)
        if not tick > 0:
            raise ValueError(f"spread must be None, False or a tick > 0 s, got {spread!r}")
    if tick is not None:
        arrival = spread_ticks(arrival, tick)
    reqs = Requests(
        arrival_s=arrival,
        input_tokens=inp.astype(np.int64, copy=False),
        output_tokens=out.astype(np.int64, copy=False),
        hit_p=hit_p,
        hit_d=hit_d,
    )
    wall = None
    if start_wall is not None:
        wall = (
            datetime.fromtimestamp(start_wall, tz=timezone.utc).replace(tzinfo=None).isoformat(" ")
        )
    info = TraceInfo(
        path=str(reader.path),
        format=reader.format,
        rows=n,
        bad_rows=reader.bad_rows,
        bad_lines=tuple(reader.bad_lines),
        has_hashes=reader.has_hashes,
        sorted_in_file=in_order,
        tick_s=tick,
        start_wallclock=wall,
        cache=spec if reader.has_hashes else None,
        prefill_blocks_held=len(sim.prefill) if reader.has_hashes else None,
        drc_requests=int(np.count_nonzero(~np.isnan(hit_d)))
        if reader.has_hashes and spec.drc
        else None,
    )
    return reqs, info
