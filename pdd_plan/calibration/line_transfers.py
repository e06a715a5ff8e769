"""A line profile from measured transfers: a CSV of transfer sizes and their times.

Columns: ``bytes`` and ``mean_s`` (required), ``p99_s``, ``max_s``, ``gbps`` (the line's rate),
``rtt_ms`` (optional), one row per transfer size. ``mean_s`` is the time on the line, from the
first byte sent to the last delivered, without the sender's copy out of GPU memory (the
profile's ``sender_copy_ms`` holds that apart, as the PDD report states it apart).

The law fitted is the one the planner and the simulator use for a transfer alone on the line
with warm connections (:func:`pdd_plan.latency.line.transfer.bare_transfer_s` without the
sender's copy): ``T(x) = setup + x / R + RTT``, ``R`` the rate one transfer gets, ``k``
connections (``streams_per_transfer``) at one connection's rate. What is fitted:

- one row: ``R`` from the mean, the setup kept at the base profile's;
- two rows or more: ``setup`` and ``1 / R`` by least squares on the means (setup never below 0);
  with more rows than these two parameters, each row is also predicted from a fit without it.

``R`` becomes the loss rate that makes one connection's loss-based rate (Mathis et al. 1997,
:func:`pdd_plan.latency.line.tcp.mathis_bytes_s`) give it at the RTT, taken as measured at the
base profile's background load (so ``loss_rate`` is what is left after its congestive part);
with ``congestion: bbr``, which ignores loss, it becomes ``per_connection_gbps``. The worst
time the model gives a transfer alone is a cold start (its connections idle past every window
halving: slow start from the initial window); it is printed beside the measured P99 and max,
not fitted to them.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from pdd_plan.common.errors import InputError
from pdd_plan.common.files import read_text
from pdd_plan.inputs.schema.io import validation_to_input_error
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency.line import tcp, transfer

FIX = "give a CSV with a header row bytes,mean_s[,p99_s,max_s,gbps,rtt_ms], one row per size"
REQUIRED = ("bytes", "mean_s")
OPTIONAL = ("p99_s", "max_s", "gbps", "rtt_ms")
MAX_ROWS = 10_000  # a microbenchmark has a few sizes; more is a wrong file
MAX_TRANSFER_BYTES = 1e13  # 10 TB: no KV transfer is larger
MAX_TRANSFER_S = 86_400.0


@dataclass(frozen=True)
class TransferRow:
    bytes: float
    mean_s: float
    p99_s: float | None = None
    max_s: float | None = None
    gbps: float | None = None
    rtt_ms: float | None = None


@dataclass(frozen=True)
class TransferFit:
    """The profile and, per row, the model's mean and worst (a cold start), and the mean
    predicted without the row (None with no more rows than parameters)."""

    sku: LineSKU
    rows: tuple[TransferRow, ...]
    mean_s: tuple[float, ...]
    worst_s: tuple[float, ...]
    held_out_s: tuple[float, ...] | None


def _number(raw: str, file: str, field: str, hi: float) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise InputError(file, field, f"not a number: {raw!r}"[:200], FIX) from None
    if not math.isfinite(v) or v <= 0 or v > hi:
        raise InputError(file, field, f"must be a positive number up to {hi:g} (got {raw})", FIX)
    return v


def _row(rec: dict, i: int, file: str, cols: list[str]) -> TransferRow:
    hi = {"bytes": MAX_TRANSFER_BYTES, "gbps": 1e7, "rtt_ms": 1e5}
    vals: dict[str, Any] = {}
    for c in cols:
        raw = (rec.get(c) or "").strip()
        if raw == "" and c in OPTIONAL:
            vals[c] = None
            continue
        if raw == "":
            raise InputError(file, f"row {i}.{c}", "empty", FIX)
        vals[c] = _number(raw, file, f"row {i}.{c}", hi.get(c, MAX_TRANSFER_S))
    row = TransferRow(**vals)
    for c in ("p99_s", "max_s"):
        v = getattr(row, c)
        if v is not None and v < row.mean_s:
            raise InputError(
                file, f"row {i}.{c}", f"{v:g} s is below the mean {row.mean_s:g} s", FIX
            )
    return row


def read_transfers(file: str) -> list[TransferRow]:
    """The rows of a transfer CSV (one-line errors naming the row and column)."""
    text = read_text(file, FIX)
    reader = csv.DictReader(io.StringIO(text))
    head = [h.strip() for h in (reader.fieldnames or [])]
    if not head:
        raise InputError(file, None, "empty file", FIX)
    reader.fieldnames = head
    missing = [c for c in REQUIRED if c not in head]
    unknown = [c for c in head if c not in REQUIRED + OPTIONAL]
    if missing or unknown:
        what = f"missing column {missing[0]!r}" if missing else f"unknown column {unknown[0]!r}"
        raise InputError(file, None, what[:200], FIX)
    cols = [c for c in REQUIRED + OPTIONAL if c in head]
    rows: list[TransferRow] = []
    try:
        for i, rec in enumerate(reader, start=1):
            if None in rec:
                raise InputError(file, f"row {i}", "more values than columns", FIX)
            if len(rows) >= MAX_ROWS:
                raise InputError(file, None, f"more than {MAX_ROWS} rows", FIX)
            rows.append(_row(rec, i, file, cols))
    except csv.Error as e:
        raise InputError(file, None, f"not CSV ({e})"[:200], FIX) from None
    if not rows:
        raise InputError(file, None, "no rows after the header", FIX)
    return rows


def _fit_setup_and_rate(x: np.ndarray, y: np.ndarray, setup0: float) -> tuple[float, float]:
    """(setup s, seconds per byte) with ``y = setup + x / R``: the one-row fit keeps
    ``setup0``; with more, least squares, setup clipped at 0 (then through the origin)."""
    if len(x) == 1 or np.ptp(x) == 0:
        return setup0, float(np.sum(y - setup0) / np.sum(x))
    a = np.vstack([np.ones_like(x), x]).T
    setup, per_byte = np.linalg.lstsq(a, y, rcond=None)[0]
    if setup < 0:
        setup, per_byte = 0.0, float(np.dot(x, y) / np.dot(x, x))
    return float(setup), float(per_byte)


def _with_rate(base: LineSKU, rate_bytes_s: float, file: str) -> tuple[LineSKU, str]:
    """``base`` whose transfer alone runs at ``rate_bytes_s``: the loss rate that gives it
    (loss-based congestion control), or one connection's ceiling (BBR)."""
    k = base.streams_per_transfer
    line = transfer.LineConfig(base, 1)
    no_loss = base.model_copy(update={"loss_rate": 0.0, "congestive_loss_rate": 0.0})
    ceiling = min(line.capacity_bytes_s, k * tcp.flow_rate_bytes_s(no_loss))
    gb = rate_bytes_s * 8 / 1e9
    if rate_bytes_s > ceiling * (1 + 1e-9):
        raise InputError(
            file,
            None,
            f"the means imply {gb:.3g} Gb/s for one transfer, above the {ceiling * 8 / 1e9:.3g}"
            f" Gb/s its {k} connections' window and the line allow at RTT {base.rtt_ms:g} ms",
            "give the path's RTT (--rtt-ms or an rtt_ms column) or a faster line (--gbps)",
        )
    if base.congestion == "bbr":
        per = rate_bytes_s / k / base.tcp_efficiency * 8 / 1e9
        sku = base.model_copy(update={"per_connection_gbps": per})
        return sku, f"per_connection_gbps {per:.4g} (BBR ignores loss: {gb:.4g} Gb/s over {k})"
    lo, hi = 1e-12, 0.5  # bisection on log loss: the transfer's rate falls as loss grows
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        got = k * tcp.flow_rate_bytes_s(no_loss.model_copy(update={"loss_rate": mid}))
        lo, hi = (mid, hi) if got > rate_bytes_s else (lo, mid)
    p = math.sqrt(lo * hi)
    base_loss = max(p - base.congestive_loss_rate * base.background_load, 0.0)
    sku = base.model_copy(update={"loss_rate": float(f"{base_loss:.4g}")})
    why = (
        f"loss_rate {base_loss:.4g}: the loss at which {k} connections' loss-based rate (Mathis,"
        f" MSS {base.mss_bytes} B, RTT {base.rtt_ms:g} ms) gives one transfer {gb:.4g} Gb/s,"
        f" {p:.4g} at the background load {base.background_load:g}"
    )
    if base.congestive_loss_rate > 0:
        why += f" less its congestive part {base.congestive_loss_rate:g} x that load"
    return sku, why


def line_time_s(sku: LineSKU, x: np.ndarray, cold: bool = False) -> np.ndarray:
    """A transfer alone on the line, warm or cold (slow start from the initial window),
    without the sender's copy: the law that is fitted."""
    line = transfer.LineConfig(sku, 1).loaded(0.0)[0]  # at the background load alone
    ramp = line.slow_start_s(x) if cold else np.zeros_like(x)
    return transfer.bare_transfer_s(x, line, ramp) - sku.sender_copy_ms / 1e3 - _copy_rate(sku, x)


def _copy_rate(sku: LineSKU, x: np.ndarray) -> np.ndarray:
    g = sku.sender_copy_gbps
    return np.zeros_like(x) if g is None else x / (g * 1e9 / 8.0)


def _fit(rows: list[TransferRow], base: LineSKU, file: str) -> tuple[LineSKU, str]:
    x = np.array([r.bytes for r in rows])
    y = np.array([r.mean_s for r in rows]) - base.rtt_ms / 1e3
    setup0 = base.setup_ms / 1e3
    setup, per_byte = _fit_setup_and_rate(x, y, setup0)
    if per_byte <= 0:
        i = int(np.argmin(y / x)) + 1
        raise InputError(
            file,
            f"row {i}.mean_s",
            f"no rate explains it: the mean is not above the RTT ({base.rtt_ms:g} ms) and setup"
            f" ({setup * 1e3:.3g} ms)",
            "give the path's RTT (--rtt-ms or an rtt_ms column) or check the means",
        )
    sku, why = _with_rate(base.model_copy(update={"setup_ms": setup * 1e3}), 1.0 / per_byte, file)
    if len(rows) > 1:
        why += f"; setup_ms {setup * 1e3:.4g} fitted with the rate by least squares on the means"
    return sku, why


def calibrate_transfers(
    rows: list[TransferRow],
    base: LineSKU,
    file: str,
    name: str,
    gbps: float | None = None,
    rtt_ms: float | None = None,
    cost_per_month: float | None = None,
) -> TransferFit:
    """Fit the per-transfer law to ``rows`` on ``base`` (its other fields kept: background
    load, congestive loss, slow start, the sender's copy), its RTT and rate from the options,
    else the columns, else the base."""
    upd: dict = {"name": name}
    col_rtt = [r.rtt_ms for r in rows if r.rtt_ms is not None]
    col_gbps = [r.gbps for r in rows if r.gbps is not None]
    if rtt_ms is not None or col_rtt:
        upd["rtt_ms"] = rtt_ms if rtt_ms is not None else float(np.mean(col_rtt))
    if gbps is not None or col_gbps:
        upd["gbps"] = gbps if gbps is not None else max(col_gbps)
    if cost_per_month is not None:
        upd["cost_per_month"] = cost_per_month
    try:
        start = LineSKU.model_validate({**base.model_dump(), **upd})
    except ValidationError as e:
        raise validation_to_input_error(
            LineSKU, e, file, "check the options and the base profile"
        ) from None
    sku, why = _fit(rows, start, file)
    x = np.array([r.bytes for r in rows])
    held = None
    if len(rows) > 2:  # more rows than the two parameters: each predicted without itself
        held = tuple(
            float(line_time_s(_fit(rows[:i] + rows[i + 1 :], start, file)[0], x[i : i + 1])[0])
            for i in range(len(rows))
        )
    src = (
        f"calibrated by `pdd-plan line calibrate --transfers {file}` from {len(rows)} measured"
        f" transfer size(s): {why}; rtt_ms {sku.rtt_ms:g}, gbps {sku.gbps:g}. Other fields from"
        f" the base profile {base.name}: {base.source}"
    )
    sku = sku.model_copy(update={"source": src})
    return TransferFit(
        sku,
        tuple(rows),
        tuple(float(v) for v in line_time_s(sku, x)),
        tuple(float(v) for v in line_time_s(sku, x, cold=True)),
        held,
    )


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def fit_table(fit: TransferFit) -> list[str]:
    """Each row's measurement beside the model: mean, worst (a cold start), held-out mean."""
    out = [
        "bytes, measured mean s, model mean s, held-out mean s, measured p99 s, measured max s,"
        " model worst s (cold start)"
    ]
    for i, r in enumerate(fit.rows):
        held = None if fit.held_out_s is None else fit.held_out_s[i]
        out.append(
            f"{r.bytes:.0f}, {_s(r.mean_s)}, {_s(fit.mean_s[i])}, {_s(held)}, {_s(r.p99_s)},"
            f" {_s(r.max_s)}, {_s(fit.worst_s[i])}"
        )
    return out
