"""Replay a workload on a plan, stage by stage, and measure it (DESIGN §4.3-4.4, issue 5).

Stages, each exact for its model unless noted (see the module docs of ``queues``/``decode``):

1. **Prefill** - FIFO instances, each request to the instance that finishes it first (least
   loaded); service = chunked prefill of the uncached suffix (``roofline`` tables).
2. **KV out of prefill** - to the line (``p_md``, ``p_rld_md``) in order of KV readiness; to RLD
   over RDMA (``network.rdma_transfer_s``, no contention); IDC-PD: to decode over RDMA.
3. **Line** - processor sharing over the pooled capacity, per-connection cap, FIFO wait for a
   connection, RTT on delivery. The PDD routing rule and the DRC (hashed traces) act here,
   when each request's KV is ready.
4. **Decode** - continuous batching on RLD and MD in fluid steps, the relay and the handoff.

Metrics (``summary``):

* ``ttft_s`` first token - arrival; ``tpot_ms`` (last - first token) / (output - 1) per request
  (requests with one output token have none); ``e2e_s`` last token - arrival; each {p50, p90, p99}.
* ``kv_transfer_s`` KV ready at prefill -> KV usable at decode, over requests that moved KV to
  (main) decode: connection wait + shared transfer + RTT (RDMA time for IDC-PD).
* ``line_utilization`` bytes sent / (line capacity x the line's active span); the pool's mean
  occupancy, share of time full, and connection waits.
* ``route_share`` requests per path; ``rld_token_share`` RLD's share of all output tokens.
* ``goodput_rps`` **SLA goodput**: requests with TTFT <= ``sla.ttft_p99_s`` and TPOT <=
  ``sla.tpot_ms`` (one-token requests: TTFT alone), divided by the arrival window (first to
  last arrival, i.e. offered rate x ``sla_attainment``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import network
from ..perf import arch, roofline
from ..perf.instance import Instance
from ..resolve import Context
from ..workload.cache import PrefixCache
from . import setup
from .decode import DecodeResult, Engine, run_decode
from .queues import (
    P_RLD,
    DRCHook,
    LineStats,
    Progress,
    Router,
    fifo_least_loaded,
    run_line,
)
from .tables import ExtendTable, PrefillTimes, StepTable

PATHS = ("p_md", "p_rld_md", "p_rld")
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
        import pandas as pd

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
            }
        )

    # ------------------------------------------------------------------ summary
    def summary(self) -> dict:
        n = len(self.route)
        a = self.arrival_s
        window = float(a[-1] - a[0]) if n > 1 else 0.0
        ok = self.sla_ok()
        out_tok = float(self.output_tokens.sum())
        shares = np.bincount(self.route, minlength=3) / max(n, 1)
        moved = ~np.isnan(self.kv_at_decode_s)
        res: dict = {
            "architecture": self.architecture,
            "workload": self.source,
            "seed": int(self.seed),
            "requests": int(n),
            "offered_rps": _r(n / window) if window > 0 else None,
            "window_s": _r(window),
            "ttft_s": _q(self.ttft_s),
            "tpot_ms": _q(self.tpot_s * 1e3),
            "e2e_s": _q(self.e2e_s),
            "kv_transfer_s": _q(self.kv_transfer_s[moved]),
            "prefill_wait_s": _q(self.prefill_start_s - a),
            "decode_wait_s": _q(self.dec.md_admit_s - self.dec.md_arrive_s),
            "line_utilization": None,
            "connection_pool": None,
            "route_share": {p: _r(float(s)) for p, s in zip(PATHS, shares)},
            "rld_token_share": _r(float(self.dec.rld_tokens.sum()) / out_tok if out_tok else 0.0),
            "goodput_rps": _r(float(ok.sum()) / window) if window > 0 else None,
            "sla_attainment": _r(float(ok.mean()) if n else 0.0),
            "hit_rate": {
                "prefill_mean": _r(float(np.nanmean(self.hit_p)) if n else 0.0),
                "decode_mean": _r(float(np.nanmean(self.hit_d)))
                if np.any(~np.isnan(self.hit_d))
                else None,
            },
            "utilization": {
                "prefill": _r(float(self.prefill_s.sum()) / (self.prefill_count * window))
                if window > 0
                else None,
                "decode_batch": [_r(b / m) for b, m in zip(self.dec.mean_batch, self.decode_bmax)],
            },
        }
        ls = self.line
        if ls is not None and self.line_capacity_bytes_s:
            span = ls.span_s
            cw = self.conn_start_s - self.kv_ready_s
            cw = cw[~np.isnan(cw)]
            res["line_utilization"] = (
                _r(ls.bytes_sent / (self.line_capacity_bytes_s * span)) if span > 0 else 0.0
            )
            res["connection_pool"] = {
                "size": int(self.pool_size),
                "mean_in_use": _r(ls.conn_area / span) if span > 0 else 0.0,
                "occupancy": _r(ls.conn_area / span / self.pool_size) if span > 0 else 0.0,
                "full_time_share": _r(ls.full_s / span) if span > 0 else 0.0,
                "max_waiting": int(ls.max_waiting),
                "wait_s": _q(cw),
            }
            res["line_bytes_mean"] = _r(
                float(self.line_bytes[moved].mean()) if moved.any() else 0.0
            )
        return res


def _r(x: float, sig: int = 6) -> float:
    x = float(x)
    if not math.isfinite(x) or x == 0.0:
        return x if math.isfinite(x) else None  # type: ignore[return-value]
    return float(f"{x:.{sig}g}")


def _q(x: np.ndarray) -> dict:
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return {"p50": None, "p90": None, "p99": None, "mean": None}
    p = np.percentile(x, QS)
    return {
        "p50": _r(p[0]),
        "p90": _r(p[1]),
        "p99": _r(p[2]),
        "mean": _r(float(x.mean())),
    }


def _groups(insts: list[Instance]) -> tuple[list[Instance], list[int]]:
    """Identical instances grouped (order of first appearance)."""
    types: list[Instance] = []
    counts: list[int] = []
    for i in insts:
        for j, t in enumerate(types):
            if t == i:
                counts[j] += 1
                break
        else:
            types.append(i)
            counts.append(1)
    return types, counts


def _engines(
    insts: list[Instance], ctx_range: tuple[float, float], ref_ctx: float, tpot_s: float
) -> tuple[list[Engine], list[int]]:
    types, counts = _groups(insts)
    out: list[Engine] = []
    for inst, c in zip(types, counts):
        b, _ = roofline.max_batch_for_tpot(inst, ref_ctx, tpot_s)
        b = max(int(b), 1)
        e = Engine(StepTable(inst, *ctx_range, b), b, float(inst.kv_pool_bytes))
        out += [e] * c
    return out, [e.bmax for e in out]


def simulate(
    ctx: Context,
    plan: dict,
    architecture: str,
    reqs: setup.SimRequests,
    seed: int = 0,
    progress: Progress | None = None,
) -> SimResult:
    """Replay ``reqs`` on one architecture of ``plan`` (an optimize result or one of its plans)."""
    sc = ctx.scenario
    pol, sla = sc.policy, sc.sla
    fl = setup.fleet(ctx, plan, architecture)
    r = reqs.req
    n = len(r)
    if n == 0:
        from ..errors import InputError

        raise InputError(None, "--requests", "nothing to simulate", "give at least one request")
    model = ctx.model
    inp = r.input_tokens.astype(float)
    out = r.output_tokens.astype(np.int64)
    hit_p = np.nan_to_num(r.hit_p, nan=0.0)
    # 1. prefill
    chunk = sc.search.prefill_chunk_tokens
    types, counts = _groups(fl.prefill)
    cached = np.floor(inp * hit_p)
    new = np.maximum(inp - cached, 1.0)
    services = [PrefillTimes(t, chunk)(new, cached) for t in types]
    start, server = fifo_least_loaded(r.arrival_s, services, counts, progress)
    grp = np.repeat(np.arange(len(types)), counts)[server]
    service = np.choose(grp, services) if len(types) > 1 else services[0]
    ready = start + service
    full_kv = np.asarray(arch.kv_bytes(model, inp), dtype=float)
    rdma_by_type = [
        network.rdma_transfer_s(
            full_kv,
            t.n_gpus,
            t.gpu.interconnect.rdma_gbps_per_gpu,
            t.gpu.efficiency.comm_efficiency,
        )
        for t in types
    ]
    rdma = np.choose(grp, rdma_by_type) if len(types) > 1 else rdma_by_type[0]
    # 2-3. KV to decode: line or RDMA, routing
    route = np.zeros(n, dtype=np.int8)
    hit_d = np.asarray(r.hit_d, dtype=float).copy()
    line_bytes = np.zeros(n)
    conn_start = None
    stats = None
    cap_bps = None
    pool = None
    if fl.line is None:
        t_md = ready + rdma
        hit_d[:] = np.nan
    else:
        ln = fl.line
        order = np.argsort(ready, kind="stable")
        router = None
        if architecture == "pdd" and fl.relay:
            lim = pol.singular_max_output_tokens
            router = Router(
                r.arrival_s.tolist(), out.tolist(), sla.ttft_p90_s, -1 if lim is None else lim
            )
        hook = None
        sizes = None
        if reqs.hashes and pol.drc:
            held = [math.nan] * n
            md_tokens = sum(i.kv_capacity_tokens for i in fl.decode)
            hook = DRCHook(
                PrefixCache.from_tokens(int(md_tokens), reqs.block_tokens),
                reqs.flat,
                reqs.offsets,
                r.input_tokens.tolist(),
                network.line_bytes(model, inp, np.zeros(n), False).tolist(),
                arch.kv_bytes_per_token(model),
                held,
            )
        else:
            sizes = network.line_bytes(model, inp, np.nan_to_num(hit_d), pol.drc)
        pool = ln.sku.connections * ln.count
        cap_bps = ln.capacity_bytes_s
        conn_start, end, line_bytes, route, stats = run_line(
            ready[order],
            order,
            sizes,
            cap_bps,
            ln.flow_cap_bytes_s,
            pool,
            ln.sku.rtt_ms / 1e3,
            router,
            hook,
            progress,
        )
        if hook is not None:
            hit_d = np.asarray(hook.held_tokens) / np.maximum(inp, 1.0)
        elif not pol.drc:
            hit_d[:] = 0.0
        t_md = end + ln.sku.rtt_ms / 1e3
        p_rld = route == P_RLD
        hit_d[p_rld] = np.nan
    # 4. decode
    tpot = sla.tpot_ms / 1e3
    step_ctx = inp + out / 2.0
    ctx_pts = (float(step_ctx.min()), float(step_ctx.max()))
    ref = float(step_ctx.mean())
    md_eng, md_b = _engines(fl.decode, ctx_pts, ref, tpot)
    relay = fl.relay if (architecture == "pdd" and fl.line is not None) else []
    rld_eng, rld_b = _engines(relay, ctx_pts, ref, tpot) if relay else ([], [])
    cap = int(pol.relay_max_tokens)
    ext = None
    if relay:
        ext = ExtendTable(fl.decode[0], cap, np.unique(np.quantile(inp, [0, 0.5, 1]).round()))
    kv_md = np.asarray(arch.kv_bytes(model, inp + out), dtype=float)
    kv_rld = np.asarray(arch.kv_bytes(model, inp + np.minimum(out, cap)), dtype=float)
    t_rld = ready + rdma
    dec = run_decode(
        route,
        t_md,
        t_rld,
        out,
        step_ctx,
        inp,
        kv_md,
        kv_rld,
        md_eng,
        rld_eng,
        ext,
        cap,
        pol.handoff == "one_shot",
        progress,
        fl.line.sku.rtt_ms / 2e3 if fl.line is not None else 0.0,
    )
    kv_at = np.where(route == P_RLD, np.nan, t_md)
    if fl.line is not None:
        line_bytes = np.where(route == P_RLD, 0.0, line_bytes)
    return SimResult(
        architecture=architecture,
        source=reqs.source,
        seed=seed,
        sla=sla.model_dump(),
        arrival_s=r.arrival_s,
        input_tokens=r.input_tokens,
        output_tokens=out,
        hit_p=hit_p,
        hit_d=hit_d,
        route=route.astype(np.int64),
        prefill_instance=server,
        prefill_start_s=start,
        prefill_s=service,
        kv_ready_s=ready,
        line_bytes=line_bytes if fl.line is not None else full_kv,
        kv_at_decode_s=kv_at,
        dec=dec,
        line=stats,
        line_capacity_bytes_s=cap_bps,
        pool_size=pool,
        conn_start_s=conn_start,
        prefill_count=len(fl.prefill),
        decode_bmax=md_b + rld_b,
        relay_count=len(relay),
    )


def run(
    ctx: Context,
    plan: dict,
    architecture: str = "pdd",
    n_requests: int | None = None,
    seed: int | None = None,
    trace: str | None = None,
    progress: Progress | None = None,
) -> SimResult:
    """Build the workload for ``plan`` (its sized rate; the scenario's trace or distributions)
    and simulate it."""
    fl_rate = setup.arch_plan(plan, architecture).get("goodput_rps")
    s = ctx.scenario.seed if seed is None else int(seed)
    reqs = setup.requests(ctx, n_requests, s, fl_rate, trace)
    return simulate(ctx, plan, architecture, reqs, s, progress)


def verify(
    ctx: Context,
    plan_dict: dict,
    architecture: str,
    n_requests: int = 20_000,
    seed: int | None = None,
) -> dict:
    """Simulate one architecture's plan and check it against the scenario's SLA.

    ``plan_dict`` is either ``optimize(ctx)``'s result or one entry of its ``plans``. Returns
    the :meth:`SimResult.summary` dict plus:

    * ``checks``: ``ttft_p90`` / ``ttft_p99`` (simulated TTFT percentile vs ``sla.ttft_p90_s``
      / ``sla.ttft_p99_s``) and ``tpot_p90`` (simulated per-request TPOT P90 vs
      ``sla.tpot_ms``), each ``{"simulated", "target", "ok"}``;
    * ``sla_met``: all checks ok;
    * ``tail_breakdown_s``: mean prefill wait, prefill, KV transfer and decode wait of the
      requests at or above the simulated TTFT P90 (where the time goes in the tail);
    * ``bottleneck``: None when the SLA is met, else which cap to tighten: ``"prefill"``
      (prefill utilization), ``"line"`` (line utilization), or ``"decode"`` (decode batch /
      utilization; also when only TPOT fails).
    """
    res = run(ctx, plan_dict, architecture, n_requests, seed)
    s = res.summary()
    sla = ctx.scenario.sla
    checks = {
        "ttft_p90": _check(s["ttft_s"]["p90"], sla.ttft_p90_s),
        "ttft_p99": _check(s["ttft_s"]["p99"], sla.ttft_p99_s),
        "tpot_p90": _check(s["tpot_ms"]["p90"], sla.tpot_ms),
    }
    ttft = res.ttft_s
    tail = ttft >= np.percentile(ttft, 90)
    dec = res.dec
    parts = {
        "prefill_wait": res.prefill_start_s - res.arrival_s,
        "prefill": res.prefill_s,
        "kv_transfer": res.kv_transfer_s,
        "decode_wait": dec.md_admit_s - dec.md_arrive_s,
    }
    brk = {
        k: _r(float(np.nanmean(v[tail])) if np.any(~np.isnan(v[tail])) else 0.0)
        for k, v in parts.items()
    }
    met = all(c["ok"] for c in checks.values())
    bottleneck = None
    if not met:
        if not (checks["ttft_p90"]["ok"] and checks["ttft_p99"]["ok"]):
            q = {
                "prefill": brk["prefill_wait"] or 0.0,
                "line": brk["kv_transfer"] or 0.0,
                "decode": brk["decode_wait"] or 0.0,
            }
            bottleneck = max(q, key=q.get)
        else:
            bottleneck = "decode"
    s.update({"checks": checks, "sla_met": met, "tail_breakdown_s": brk, "bottleneck": bottleneck})
    return s


def _check(sim: float | None, target: float) -> dict:
    ok = sim is not None and sim <= target
    return {"simulated": sim, "target": target, "ok": bool(ok)}
