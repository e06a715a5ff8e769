"""What one simulation measured: per-request arrays and the summary the CLI and verify print.

Metrics (``SimResult.summary``):

* ``ttft_s`` first token - arrival; ``tpot_ms`` (last - first token) / (output - 1) per request
  (requests with one output token have none); ``e2e_s`` last token - arrival; each {p50, p90, p99}.
* ``kv_transfer_s`` KV ready at prefill -> KV usable at decode, over requests that moved KV to
  (main) decode: connection wait + shared transfer + RTT (RDMA time for IDC-PD).
* ``line_utilization`` bytes sent / (line capacity x the line's active span); the pool's mean
  occupancy, share of time full, connection waits (``wait_s``), offered utilization
  (``utilization``: connection-seconds per second of the offered window per connection, above 1
  when the pool cannot keep up) and the transfer after the wait (``transfer_s``: connection
  acquired -> KV delivered).
* ``unstable`` / ``stability``: offered line load (bytes / the KV-ready window) against what the
  line and its pool can carry, ``min(line goodput, pool x one flow's rate)``; when offered >=
  capacity the queue has no steady state and every figure is that of the stated window.
* ``route_share`` requests per path; ``rld_token_share`` RLD's share of all output tokens.
* ``goodput_rps`` **SLA goodput**: requests with TTFT <= ``sla.ttft_p99_s`` and TPOT <=
  ``sla.tpot_ms`` (one-token requests: TTFT alone), divided by the arrival window (first to
  last arrival, i.e. offered rate x ``sla_attainment``).
* ``warmup``: the replay's first requests dropped as its warm-up (``sim.warmup``, one-sided
  MSER-5 over the TTFT and TPOT series): every per-request figure above (percentiles, route
  shares, hit rates, goodput, attainment, prefill utilization, the pool's waits) is over the
  kept requests and their arrival window. Time-integrated figures (decode batch, line
  utilization, pool occupancy, stability) are over the whole replay.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from pdd_plan.architectures import PATHS
from pdd_plan.sim import sequential
from pdd_plan.sim.decode.decoder import DecodeResult
from pdd_plan.sim.queues import LineStats
from pdd_plan.sim.warmup import Truncation

QS = (50, 90, 99)


@dataclass
class SimResult:
    """Per-request arrays of one run plus the line and fleet figures; ``summary()`` for output."""

    architecture: str
    source: str
    seed: int
    sla: dict
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    hit_p: np.ndarray
    hit_d: np.ndarray  # MD-side held fraction (NaN: no lookup, e.g. p_rld)
    route: np.ndarray
    prefill_instance: np.ndarray
    prefill_start_s: np.ndarray
    prefill_s: np.ndarray
    kv_ready_s: np.ndarray
    line_bytes: np.ndarray
    kv_at_decode_s: np.ndarray  # KV usable at (main) decode; NaN for p_rld
    dec: DecodeResult
    line: LineStats | None
    line_capacity_bytes_s: float | None
    pool_size: int | None
    conn_start_s: np.ndarray | None
    prefill_count: int
    decode_bmax: list[int] = field(default_factory=list)
    relay_count: int = 0
    line_usable_bytes_s: float | None = None  # min(line, pool x per-transfer rate)
    pool_connections: int | None = None  # TCP connections; pool_size = transfers at once
    streams_per_transfer: int = 1  # connections one transfer holds
    # leading requests (arrival order) the statistics leave out; None: not searched (raw replay)
    warmup: Truncation | None = None

    @property
    def warmup_requests(self) -> int:
        return self.warmup.requests if self.warmup is not None else 0

    def kept(self) -> slice:
        """The requests the statistics are over: past the warm-up (arrays are in arrival
        order, as ``setup.requests`` builds them)."""
        return slice(self.warmup_requests, None)

    def head(self, n: int) -> SimResult:
        """The first ``n`` requests' figures (arrival order); the time integrals (line, decode
        batch) stay those of the whole replay. For a look of ``sim.sequential``: there they
        are the full replay's first ``n`` requests, exactly."""
        if n >= len(self.route):
            return self
        d = self.dec
        dec = replace(
            d,
            first_s=d.first_s[:n],
            end_s=d.end_s[:n],
            rld_tokens=d.rld_tokens[:n],
            md_arrive_s=d.md_arrive_s[:n],
            md_admit_s=d.md_admit_s[:n],
            md_instance=d.md_instance[:n],
        )
        per_request = {
            f.name: getattr(self, f.name)[:n]
            for f in fields(self)
            if isinstance(getattr(self, f.name), np.ndarray)
        }
        return replace(self, dec=dec, warmup=None, **per_request)

    # ------------------------------------------------------------------ per request
    @property
    def ttft_s(self) -> np.ndarray:
        return self.dec.first_s - self.arrival_s

    @property
    def tpot_s(self) -> np.ndarray:
        k = self.output_tokens - 1
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(k > 0, (self.dec.end_s - self.dec.first_s) / np.maximum(k, 1), np.nan)

    @property
    def e2e_s(self) -> np.ndarray:
        return self.dec.end_s - self.arrival_s

    @property
    def kv_transfer_s(self) -> np.ndarray:
        return self.kv_at_decode_s - self.kv_ready_s

    def sla_ok(self) -> np.ndarray:
        tp = self.tpot_s
        tpot_ok = np.isnan(tp) | (tp <= self.sla["tpot_ms"] / 1e3 + 1e-12)
        return (self.ttft_s <= self.sla["ttft_p99_s"] + 1e-12) & tpot_ok

    def records(self):
        """One row per request (a pandas DataFrame)."""
        import pandas as pd  # optional and heavy: only for a DataFrame of the rows

        d = self.dec
        return pd.DataFrame(
            {
                "request": np.arange(len(self.route)),
                "arrival_s": self.arrival_s,
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "hit_p": self.hit_p,
                "hit_d": self.hit_d,
                "path": np.asarray(PATHS)[self.route],
                "prefill_instance": self.prefill_instance,
                "prefill_wait_s": self.prefill_start_s - self.arrival_s,
                "prefill_s": self.prefill_s,
                "line_bytes": self.line_bytes,
                "conn_wait_s": (self.conn_start_s - self.kv_ready_s)
                if self.conn_start_s is not None
                else np.full(len(self.route), np.nan),
                "kv_transfer_s": self.kv_transfer_s,
                "rld_tokens": d.rld_tokens,
                "decode_instance": d.md_instance,
                "decode_wait_s": d.md_admit_s - d.md_arrive_s,
                "ttft_s": self.ttft_s,
                "tpot_ms": self.tpot_s * 1e3,
                "e2e_s": self.e2e_s,
                "sla_ok": self.sla_ok(),
                "warmup": np.arange(len(self.route)) < self.warmup_requests,
            }
        )

    # ------------------------------------------------------------------ summary
    def summary(self) -> dict:
        k = self.kept()
        n = len(self.route[k])
        a = self.arrival_s[k]
        window = float(a[-1] - a[0]) if n > 1 else 0.0
        ok = self.sla_ok()[k]
        out_tok = float(self.output_tokens[k].sum())
        shares = np.bincount(self.route[k], minlength=3) / max(n, 1)
        moved = ~np.isnan(self.kv_at_decode_s[k])
        dec = self.dec
        hit_d = self.hit_d[k]
        res: dict = {
            "architecture": self.architecture,
            "workload": self.source,
            "seed": int(self.seed),
            "requests": int(len(self.route)),
            "warmup": (self.warmup or Truncation(0, True, "not searched", "none")).summary(
                len(self.route)
            ),
            "offered_rps": sig(n / window) if window > 0 else None,
            "window_s": sig(window),
            "ttft_s": quantiles(self.ttft_s[k]),
            "tpot_ms": quantiles(self.tpot_s[k] * 1e3),
            "e2e_s": quantiles(self.e2e_s[k]),
            "kv_transfer_s": quantiles(self.kv_transfer_s[k][moved]),
            "prefill_wait_s": quantiles(self.prefill_start_s[k] - a),
            "decode_wait_s": quantiles(dec.md_admit_s[k] - dec.md_arrive_s[k]),
            "line_utilization": None,
            "connection_pool": None,
            "route_share": {p: sig(float(s)) for p, s in zip(PATHS, shares)},
            "rld_token_share": sig(float(dec.rld_tokens[k].sum()) / out_tok if out_tok else 0.0),
            "goodput_rps": sig(float(ok.sum()) / window) if window > 0 else None,
            "sla_attainment": sig(float(ok.mean()) if n else 0.0),
            "hit_rate": {
                "prefill_mean": sig(float(np.nanmean(self.hit_p[k])) if n else 0.0),
                "decode_mean": sig(float(np.nanmean(hit_d))) if np.any(~np.isnan(hit_d)) else None,
            },
            "utilization": {
                "prefill": sig(float(self.prefill_s[k].sum()) / (self.prefill_count * window))
                if window > 0
                else None,
                # time-averaged over the whole replay (the batch's fill-up included)
                "decode_batch": [sig(b / m) for b, m in zip(dec.mean_batch, self.decode_bmax)],
            },
        }
        res["unstable"] = False
        ls = self.line
        if ls is not None and self.line_capacity_bytes_s:
            res.update(self._line_summary(ls, moved))
        res["overloaded"] = overloaded(res)
        res.update(self._intervals(res))
        return res

    def _intervals(self, res: dict) -> dict:
        """Each printed TTFT and TPOT percentile's batch-means interval (``ttft_s_ci``,
        ``tpot_ms_ci``: {p50, p90, p99: [lo, hi]}), batches of at least the requests in the
        system (Little), and which are not settled within +-5% (``unsettled``)."""
        k = self.kept()
        a = self.arrival_s[k]
        held = sequential.in_system(a, self.e2e_s[k]) if a.size > 1 else math.inf
        out: dict = {}
        for name, x in (("ttft_s", self.ttft_s[k]), ("tpot_ms", self.tpot_s[k] * 1e3)):
            ci = {}
            for q in QS:
                b = None
                if math.isfinite(held):
                    b = sequential.quantile_interval(x, q / 100, math.ceil(held))
                ci[f"p{q}"] = None if b is None else [sig(b[0]), sig(b[1])]
            out[f"{name}_ci"] = ci
        out["unsettled"] = sequential.unsettled(
            {m: out[f"{m}_ci"] for m in ("ttft_s", "tpot_ms")},
            {m: res[m] for m in ("ttft_s", "tpot_ms")},
        )
        return out

    def offered_window_s(self) -> float:
        """Seconds the line's offered load is measured over: first to last KV ready among its
        transfers; with fewer than two transfers, or all ready at once, no arrival rate can
        be measured, and the load is what the line carried while in use (its active span,
        as its utilization): a one-request replay's offered load is its one transfer's, not 0."""
        ls = self.line
        if ls is None:
            return 0.0
        return ls.ready_span_s if ls.transfers >= 2 and ls.ready_span_s > 0 else ls.span_s

    def line_load(self) -> tuple[float, float]:
        """(offered, capacity) bytes/s of the line: bytes sent over the offered window, and
        ``min(line goodput, pool x one flow's rate)``; (0, inf) without a line."""
        ls = self.line
        if ls is None or not self.line_capacity_bytes_s:
            return 0.0, math.inf
        usable = self.line_usable_bytes_s or self.line_capacity_bytes_s
        w = self.offered_window_s()
        return (ls.bytes_sent / w if w > 0 else 0.0), usable

    @property
    def unstable(self) -> bool:
        """Offered line load at or over what the line and its pool carry: no steady state."""
        offered, usable = self.line_load()
        return bool(offered >= usable)

    def _line_summary(self, ls: LineStats, moved: np.ndarray) -> dict:
        """The line's figures: utilization, the connection pool (wait, then transfer), and
        whether the offered load exceeds what the line and its pool can carry."""
        res: dict = {}
        span = ls.span_s
        k = self.kept()  # per-request figures over the kept requests; ``moved`` is over them
        cw = (self.conn_start_s - self.kv_ready_s)[k]
        cw = cw[~np.isnan(cw)]
        res["line_utilization"] = (
            sig(ls.bytes_sent / (self.line_capacity_bytes_s * span)) if span > 0 else 0.0
        )
        st = self.streams_per_transfer
        w = self.offered_window_s()
        slots = self.pool_size  # transfers the pool serves at once (connections // st)
        res["connection_pool"] = {
            "size": int(self.pool_connections or slots * st),
            "streams_per_transfer": int(st),
            "transfer_slots": int(slots),
            "mean_in_use": sig(ls.conn_area * st / span) if span > 0 else 0.0,
            "occupancy": sig(ls.conn_area / span / slots) if span > 0 else 0.0,
            "full_time_share": sig(ls.full_s / span) if span > 0 else 0.0,
            "max_waiting": int(ls.max_waiting),
            "wait_s": quantiles(cw),
            # offered load a / c = transfer-seconds asked for per second of the offered
            # window, per transfer slot: above 1 the pool cannot keep up (occupancy stays <= 1)
            "utilization": sig(ls.conn_area / (w * slots)) if w > 0 else None,
            "transfer_s": quantiles((self.kv_at_decode_s - self.conn_start_s)[k][moved]),
        }
        offered, usable = self.line_load()
        unstable = self.unstable
        res["unstable"] = unstable
        res["stability"] = {
            "unstable": unstable,
            "offered_gbps": sig(offered * 8e-9),
            "capacity_gbps": sig(usable * 8e-9),  # min(line goodput, pool x flow rate)
            "offered_over_capacity": sig(offered / usable),
            # an unstable queue has no steady state: its figures are those of this window
            "window_requests": int(len(self.route)),
            "window_s": sig(float(self.arrival_s[-1] - self.arrival_s[0]))
            if len(self.route) > 1
            else 0.0,
        }
        lb = self.line_bytes[k][moved]
        res["line_bytes_mean"] = sig(float(lb.mean()) if moved.any() else 0.0)
        return res


def sig(x: float, digits: int = 6) -> float:
    x = float(x)
    if not math.isfinite(x) or x == 0.0:
        return x if math.isfinite(x) else None  # type: ignore[return-value]
    return float(f"{x:.{digits}g}")


def quantiles(x: np.ndarray) -> dict:
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return {"p50": None, "p90": None, "p99": None, "mean": None}
    p = np.percentile(x, QS)
    return {
        "p50": sig(p[0]),
        "p90": sig(p[1]),
        "p99": sig(p[2]),
        "mean": sig(float(x.mean())),
    }


# a pool offered this share of what it serves or more is flagged: a queue's waits grow without
# bound as its load nears 1, so over a replay of finite length they are still climbing there
OVERLOAD = 0.98


def overloaded(summary: dict) -> list[str]:
    """The pools the replay overloaded, each with why: prefill (its busy share of the arrival
    window), decode (an instance whose mean batch is at its most: requests wait to be admitted)
    and the line (offered bytes at or over what it and its pool carry: `unstable`)."""
    out = []
    u = summary.get("utilization") or {}
    if u.get("prefill") is not None and u["prefill"] >= OVERLOAD:
        out.append(f"prefill (offered {u['prefill']:.0%} of what it serves: its queue grows)")
    full = [b for b in u.get("decode_batch") or [] if b >= OVERLOAD]
    if full:
        out.append(
            f"decode ({len(full)} instance(s) at {max(full):.0%} of their most requests: "
            "requests wait to be admitted)"
        )
    st = summary.get("stability")
    if summary.get("unstable") and st is not None:
        out.append(f"line (offered {st['offered_over_capacity']:.3g}x what it and its pool carry)")
    return out
