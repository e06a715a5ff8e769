"""What every trace format shares: opening the file, parsing one field, collecting good rows.

A format module (``trace_mooncake``, ``trace_azure``, ``trace_generic``) turns one record
into a :data:`Row` with the field parsers here, or raises :class:`BadRow`; the reader
(``trace_reader``) feeds good rows to a :class:`ChunkBuilder`, which hands out
:class:`TraceChunk` column arrays so that millions of rows are never held as Python objects.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO, cast

import numpy as np

from pdd_plan.common import numbers

# One good row: arrival (s from trace start), input tokens, output tokens, hit rate
# (NaN = unknown) and the prefix-block hash ids (None when the format has none).
Row = tuple[float, int, int, float, list[int] | None]

READ_BYTES = 1 << 24  # the file is read 16 MiB at a time


class BadRow(Exception):
    """A row that cannot be read: the field at fault (None: the whole row), what, and the fix."""

    def __init__(self, field: str | None, problem: str, fix: str):
        super().__init__(problem)
        self.field, self.problem, self.fix = field, problem, fix


# --------------------------------------------------------------------------- files


def open_binary(path: Path) -> IO[bytes]:
    """The file's bytes, gunzipped on the fly when it ends in ``.gz``."""
    if path.suffix.lower() == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


def base_suffix(path: Path) -> str:
    """The extension that says the format (``.jsonl`` of ``trace.jsonl.gz``), lower case."""
    p = path.with_suffix("") if path.suffix.lower() == ".gz" else path
    return p.suffix.lower()


def csv_rows(f: IO[bytes]) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of each CSV row that has a non-blank cell."""
    reader = csv.reader(raw.decode("utf-8", "replace") for raw in f)
    for row in reader:
        if row and any(c.strip() for c in row):
            yield reader.line_num, row  # a quoted multi-line row reports its last line


def json_object(raw: bytes, fix: str) -> dict:
    """One JSONL line as a dict."""
    try:
        rec = numbers.loads(raw)
    except numbers.NumberTooLarge as e:
        raise BadRow(e.field, e.problem, e.fix) from None
    except ValueError as e:
        raise BadRow(None, f"bad JSON ({e})", fix) from None
    if type(rec) is not dict:
        raise BadRow(None, f"record is a {type(rec).__name__}, not an object", fix)
    return rec


def required(rec: dict, keys: tuple[str, ...], fix: str) -> list[object]:
    """The values of ``keys`` in ``rec``; the first missing one is the bad field."""
    try:
        return [rec[k] for k in keys]
    except KeyError as e:
        raise BadRow(e.args[0], "missing", fix) from None


def column_positions(header: list[str], keys: tuple[str, ...], fix: str) -> list[int]:
    """Where each of ``keys`` sits in a CSV header."""
    missing = [k for k in keys if k not in header]
    if missing:
        raise BadRow(None, f"header lacks columns {missing}", fix)
    return [header.index(k) for k in keys]


def check_width(row: list[str], width: int, header: list[str], fix: str) -> None:
    """A CSV row must reach the rightmost column the format reads."""
    if len(row) < width:
        raise BadRow(None, f"{len(row)} columns, expected {len(header)}", fix)


class ByteWindow:
    """A binary file read in big blocks, handed out ``rows`` lines at a time.

    :meth:`fill` makes the window hold ``rows`` whole lines from its position, or the rest
    of the file; then either a parser reads lines straight from :meth:`view` and reports
    how far it got (:meth:`consumed`), or :meth:`take_lines` gives the next ``rows`` lines
    as iterating the file would (each with its newline). One buffer is reused, read into
    in place: fresh 16 MiB blocks joined to the leftover cost ~0.3 s per 250 MiB in copies
    and page faults.
    """

    def __init__(self, f: IO[bytes], rows: int, block_bytes: int = READ_BYTES):
        self.f, self.rows, self.block_bytes = f, rows, block_bytes
        self.buf = bytearray(block_bytes)
        self.pos = 0  # the window is buf[pos:end]
        self.end = 0
        self.newlines = 0  # in the window
        self.eof = False

    def fill(self) -> bool:
        """Read until the window holds ``rows`` lines or the file's end; False when empty."""
        while not self.eof and self.newlines < self.rows:
            if self.pos:  # move the window to the front
                left = self.end - self.pos
                with memoryview(self.buf) as mv:  # memoryview copies overlaps by memmove
                    mv[:left] = mv[self.pos : self.end]
                self.pos, self.end = 0, left
            if len(self.buf) - self.end < self.block_bytes:
                # grow into a new buffer rather than resizing this one: a view a parser took
                # may not be garbage-collected yet, and a bytearray with live exports cannot
                # be resized (BufferError); growth is rare (a window longer than one block)
                grown = bytearray(len(self.buf) + self.block_bytes)
                grown[: self.end] = memoryview(self.buf)[: self.end]
                self.buf = grown
            with memoryview(self.buf) as free:
                got = self.f.readinto(free[self.end : self.end + self.block_bytes])  # type: ignore[attr-defined]
            self.eof = not got
            self.newlines += self.buf.count(b"\n", self.end, self.end + got)
            self.end += got
        return self.pos < self.end

    def view(self) -> tuple[memoryview, int, int, bool]:
        """(the buffer up to the window's end, position, lines wanted, it ends the file).
        The memoryview must be released before the next :meth:`fill`."""
        return memoryview(self.buf)[: self.end], self.pos, self.rows, self.eof

    def consumed(self, end: int, lines: int) -> None:
        """A parser read ``lines`` lines up to byte ``end``."""
        self.newlines -= lines  # a last line without newline ends the file: no matter
        self.pos = end

    def take_lines(self) -> list[bytes]:
        """The next ``rows`` lines (fewer at the end of the file)."""
        window = bytes(memoryview(self.buf)[self.pos : self.end])
        lines = list(islice(io.BytesIO(window), self.rows))
        self.consumed(self.pos + sum(map(len, lines)), len(lines))
        return lines


# --------------------------------------------------------------------------- fields


def whole_number(v: object, field: str, minimum: int, fix: str) -> int:
    """An integer >= ``minimum``, from an int, a whole float or a numeric string."""
    if type(v) is int:
        x = v
    elif type(v) is float and v.is_integer():
        x = int(v)
    elif type(v) is str:
        x = _whole_number_text(v, field, fix)
    else:
        raise BadRow(field, f"not an integer: {v!r}", fix)
    _whole_in_bounds(x, field)
    if x < minimum:
        what = "negative" if x < 0 else "too small"
        raise BadRow(field, f"{what} value {x} (must be >= {minimum})", fix)
    return x


def _whole_in_bounds(x: int, field: str) -> None:
    try:
        numbers.check_whole(x, field)
    except numbers.NumberTooLarge as e:
        raise BadRow(field, e.problem, e.fix) from None


def _whole_number_text(v: str, field: str, fix: str) -> int:
    s = v.strip()
    if len(s.lstrip("+-")) > numbers.digits():  # before int() reads 4,000 digits
        e = numbers.NumberTooLarge(field, s)
        raise BadRow(field, e.problem, e.fix)
    try:
        return int(s)
    except ValueError:
        pass
    try:
        f = float(s)  # "12.0" is a whole number too
    except ValueError:
        raise BadRow(field, f"not a number: {v!r}", fix) from None
    if not f.is_integer():
        raise BadRow(field, f"not a whole number: {v!r}", fix)
    return int(f)


def finite_number(v: object, field: str, fix: str) -> float:
    """A finite float, from an int, a float or a numeric string."""
    if type(v) is float or type(v) is int:
        if type(v) is int:
            _whole_in_bounds(v, field)
        x = float(v)
    elif type(v) is str:
        try:
            x = float(v)
        except ValueError:
            raise BadRow(field, f"not a number: {v!r}", fix) from None
    else:
        raise BadRow(field, f"not a number: {v!r}", fix)
    if not math.isfinite(x):
        raise BadRow(field, f"not finite: {v!r}", fix)
    if numbers.too_large(x):
        e = numbers.NumberTooLarge(field, str(v))
        raise BadRow(field, e.problem, e.fix)
    return x


def hit_rate(v: object, fix: str) -> float:
    """An optional ``hit_rate`` in [0, 1]; missing, null or an empty cell is NaN (unknown)."""
    if v is None or (type(v) is str and not v.strip()):
        return math.nan
    x = finite_number(v, "hit_rate", fix)
    if not 0.0 <= x <= 1.0:
        raise BadRow("hit_rate", f"value {x} outside [0, 1]", fix)
    return x


# --------------------------------------------------------------------------- chunks


@dataclass(frozen=True)
class TraceChunk:
    """Up to ``chunk_rows`` consecutive good rows of a trace, in file order."""

    first_line: int  # line number of the first row in this chunk (1-based)
    arrival_s: np.ndarray  # float64
    input_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    hit_rate: np.ndarray | None  # float64 (NaN = unknown); generic formats only
    hash_lists: list[list[int]] | None  # Mooncake with hashes, read line by line
    # Mooncake with hashes read a chunk at a time: all ids as one int64 array, ids per row
    hash_flat: np.ndarray | None = None
    hash_counts: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.input_tokens.shape[0])

    @property
    def has_hashes(self) -> bool:
        return self.hash_lists is not None or self.hash_flat is not None

    @property
    def hash_ids(self) -> list[list[int]] | None:
        """Each row's prefix-block ids as a list (built from the arrays when needed)."""
        if self.hash_lists is not None or self.hash_flat is None:
            return self.hash_lists
        assert self.hash_counts is not None
        ids = self.hash_flat.tolist()
        ends = np.cumsum(self.hash_counts).tolist()
        return [ids[e - c : e] for e, c in zip(ends, self.hash_counts.tolist())]


class ChunkBuilder:
    """Collects good rows column by column and hands them out as :class:`TraceChunk`."""

    def __init__(self, chunk_rows: int, with_hit_rate: bool):
        self.chunk_rows = chunk_rows
        self.with_hit_rate = with_hit_rate  # only the generic formats state hit rates
        self._clear()

    def _clear(self) -> None:
        self.first_line = 0
        self.arrival: list[float] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.hits: list[float] = []
        self.hashes: list[list[int]] = []

    def add(self, line_no: int, row: Row) -> TraceChunk | None:
        """Add one good row; a full chunk comes back when this row completes one."""
        t, i, o, h, ids = row
        if not self.inputs:
            self.first_line = line_no
        self.arrival.append(t)
        self.inputs.append(i)
        self.outputs.append(o)
        if self.with_hit_rate:
            self.hits.append(h)
        if ids is not None:
            self.hashes.append(ids)
        return self.flush() if len(self.inputs) >= self.chunk_rows else None

    def flush(self) -> TraceChunk | None:
        """The rows collected so far as a chunk (None when there are none)."""
        if not self.inputs:
            return None
        chunk = TraceChunk(
            first_line=self.first_line,
            arrival_s=np.asarray(self.arrival, dtype=np.float64),
            input_tokens=np.asarray(self.inputs, dtype=np.int64),
            output_tokens=np.asarray(self.outputs, dtype=np.int64),
            hit_rate=np.asarray(self.hits, dtype=np.float64) if self.with_hit_rate else None,
            hash_lists=self.hashes if self.hashes else None,  # formats without hashes add none
        )
        self._clear()
        return chunk
