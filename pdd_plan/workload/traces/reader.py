"""Detect a trace file's format and stream its good rows as chunks.

Formats are detected from the extension plus the header or first record (``.gz`` is
decompressed transparently; ``fmt=`` overrides detection); each has its own module:
``trace_mooncake`` (JSONL), ``trace_azure`` (CSV), ``trace_generic`` (JSONL or CSV).

Bad rows (bad JSON, missing field, wrong type, negative length, ...) raise
:class:`~pdd_plan.common.errors.InputError` naming ``file:line`` and the field; with
``skip_bad_rows=True`` they are skipped and counted instead. A reader only reads: prefix
hits, sorting and tick spreading are :func:`pdd_plan.workload.traces.read_trace`'s.
"""

from __future__ import annotations

import csv
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from pdd_plan.common import numbers
from pdd_plan.common.atomic import note_input
from pdd_plan.common.errors import InputError
from pdd_plan.common.files import require_file
from pdd_plan.workload.traces.azure import AZURE_KEYS, AzureRows
from pdd_plan.workload.traces.generic import GENERIC_KEYS, GenericCsvRows, GenericJsonlRows
from pdd_plan.workload.traces.mooncake import MOONCAKE_FIX, MooncakeRows
from pdd_plan.workload.traces.rows import (
    BadRow,
    ByteWindow,
    ChunkBuilder,
    Row,
    TraceChunk,
    base_suffix,
    csv_rows,
    open_binary,
)

FORMATS = ("mooncake", "azure", "generic_jsonl", "generic_csv")
DEFAULT_CHUNK_ROWS = 65_536
_MAX_BAD_LINES_KEPT = 20


class RowParser(Protocol):
    """What a format module provides: one record (JSON object or CSV cells) to a Row."""

    fix: str  # how a good row looks, for error messages
    with_hit_rate: bool  # the format states hit rates
    has_hashes: bool | None  # rows carry prefix-block hash ids (None: not known yet)
    start_wallclock_s: float | None  # wall clock of arrival 0, for wall-clock formats

    def parse(self, record) -> Row: ...  # a JSONL line (bytes) or a CSV row (cells)


_JSONL_PARSERS: dict[str, Callable[[], Any]] = {
    "mooncake": MooncakeRows,
    "generic_jsonl": GenericJsonlRows,
}
_CSV_PARSERS: dict[str, Callable[[list[str]], Any]] = {
    "azure": AzureRows,
    "generic_csv": GenericCsvRows,
}


# --------------------------------------------------------------------------- detection


def detect_format(path: str | os.PathLike) -> str:
    """One of :data:`FORMATS`, from the extension and the header or first record."""
    p = require_file(path, "check the path", what="trace file")
    line_no, first = _first_line(p)
    ext = base_suffix(p)
    looks_json = first.lstrip().startswith(b"{")
    if ext in (".jsonl", ".ndjson", ".json") or (ext != ".csv" and looks_json):
        return _jsonl_format(f"{p}:{line_no}", first)
    return _csv_format(f"{p}:{line_no}", first)


def _first_line(p: Path) -> tuple[int, bytes]:
    """(line number, bytes) of the first non-blank line."""
    try:
        with open_binary(p) as f:
            line_no, first = next(
                ((k, raw) for k, raw in enumerate(f, start=1) if raw.strip()), (0, b"")
            )
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(str(p), None, f"cannot read trace: {e}", "check the file") from None
    if not first:
        raise InputError(str(p), None, "trace file is empty", "give a file with requests")
    return line_no, first


def _jsonl_format(where: str, first: bytes) -> str:
    try:
        rec = numbers.loads(first)
    except numbers.NumberTooLarge as e:
        raise InputError(where, e.field, e.problem, e.fix) from None
    except ValueError as e:
        raise InputError(where, None, f"first record is not JSON ({e})", MOONCAKE_FIX) from None
    if isinstance(rec, dict):
        if "input_length" in rec:
            return "mooncake"
        if "input_tokens" in rec and "arrival_s" in rec:
            return "generic_jsonl"
    keys = sorted(rec) if isinstance(rec, dict) else type(rec).__name__
    raise InputError(
        where,
        None,
        f"unrecognised JSONL record (keys {keys})",
        "use Mooncake keys timestamp/input_length/output_length/hash_ids or generic "
        "keys arrival_s/input_tokens/output_tokens[/hit_rate]",
    )


def _csv_format(where: str, first: bytes) -> str:
    header = [c.strip() for c in next(csv.reader([first.decode("utf-8", "replace")]))]
    if all(k in header for k in AZURE_KEYS):
        return "azure"
    if all(k in header for k in GENERIC_KEYS):
        return "generic_csv"
    raise InputError(
        where,
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
        note_input(self.path)  # no output of this command may overwrite it
        if fmt is None:
            fmt = detect_format(self.path)
        elif fmt not in FORMATS:
            raise InputError(
                str(self.path), "format", f"unknown trace format {fmt!r}", f"use one of {FORMATS}"
            )
        else:
            require_file(self.path, "check the path", what="trace file")
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be >= 1")
        self.format = fmt
        self.skip_bad_rows = skip_bad_rows
        self.chunk_rows = int(chunk_rows)
        self.rows = 0
        self.bad_rows = 0
        self.bad_lines: list[int] = []
        self._parser: RowParser | None = None  # the last pass's, which knows what it saw

    @property
    def has_hashes(self) -> bool:
        """The rows carry prefix-block hash ids (known once a row has been read)."""
        return bool(self._parser is not None and self._parser.has_hashes)

    @property
    def start_wallclock_s(self) -> float | None:
        """Wall clock (s since 1970) of the first good row, for wall-clock formats (Azure)."""
        return None if self._parser is None else self._parser.start_wallclock_s

    def __iter__(self) -> Iterator[TraceChunk]:
        self.rows = self.bad_rows = 0
        self.bad_lines = []
        if self.format in _JSONL_PARSERS:
            chunks = self._jsonl_chunks(_JSONL_PARSERS[self.format]())
        else:
            chunks = self._csv_chunks(_CSV_PARSERS[self.format])
        try:
            for chunk in chunks:
                self.rows += len(chunk)
                yield chunk
        except (OSError, EOFError, zlib.error) as e:  # a truncated or corrupt .gz, a read error
            raise InputError(
                str(self.path), None, f"cannot read trace: {e}", "check the file (re-download it)"
            ) from None

    def _bad(self, line_no: int, err: BadRow) -> None:
        """Fail on a bad row, or (skip_bad_rows) count it and keep its line number."""
        if not self.skip_bad_rows:
            raise InputError(f"{self.path}:{line_no}", err.field, err.problem, err.fix) from None
        self.bad_rows += 1
        if len(self.bad_lines) < _MAX_BAD_LINES_KEPT:
            self.bad_lines.append(line_no)

    def _jsonl_chunks(self, parser: RowParser) -> Iterator[TraceChunk]:
        """Groups of ``chunk_rows`` lines, each read the fastest way that takes all of it:
        the parser's compiled pass over the bytes (``parse_bytes``), then one batch parse
        (``parse_batch``), then line by line, which names or skips bad rows exactly."""
        self._parser = parser
        scan = getattr(parser, "parse_bytes", None)
        batch = getattr(parser, "parse_batch", None)
        with open_binary(self.path) as f:
            window = ByteWindow(f, self.chunk_rows)
            first = 1
            while window.fill():
                got = None if scan is None else scan(*window.view(), first)
                if got is not None:
                    chunk, end = got
                    window.consumed(end, len(chunk))
                    yield chunk
                    first += len(chunk)
                    continue
                block = window.take_lines()
                fast = batch(block, first) if batch and all(map(bytes.strip, block)) else None
                if fast is not None:
                    yield fast
                else:
                    numbered = enumerate(block, start=first)
                    yield from self._chunks(((k, r) for k, r in numbered if r.strip()), parser)
                first += len(block)

    def _csv_chunks(self, make_parser: Callable[[list[str]], RowParser]) -> Iterator[TraceChunk]:
        with open_binary(self.path) as f:
            rows = csv_rows(f)
            header_line, header = next(rows, (0, None))
            if header is None:
                return
            try:
                parser = make_parser([c.strip() for c in header])
            except BadRow as err:  # a bad header is never skipped
                raise InputError(f"{self.path}:{header_line}", None, err.problem, err.fix) from None
            self._parser = parser
            yield from self._chunks(rows, parser)

    def _chunks(
        self, records: Iterator[tuple[int, object]], parser: RowParser
    ) -> Iterator[TraceChunk]:
        """Good rows of (line number, record) pairs, as chunks; bad ones go to :meth:`_bad`."""
        chunks = ChunkBuilder(self.chunk_rows, parser.with_hit_rate)
        for line_no, record in records:
            try:
                row = parser.parse(record)
            except BadRow as err:
                self._bad(line_no, err)
                continue
            full = chunks.add(line_no, row)
            if full is not None:
                yield full
        last = chunks.flush()
        if last is not None:
            yield last
