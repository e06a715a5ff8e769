"""Replay requests on a fleet, stage by stage.

Stages, each exact for its model unless noted (see the module docs of ``queues``/``decode``):

1. **Prefill** - FIFO instances, each request to the instance that finishes it first (least
   loaded); service = chunked prefill of the uncached suffix (``roofline`` tables).
2. **KV out of prefill** - to the line (``p_md``, ``p_rld_md``) in order of KV readiness; to RLD
   over RDMA (``transfer.rdma_transfer_s``, no contention); without a line: to decode over RDMA.
3. **Line** - FIFO wait for ``k`` connections of a finite pool (a transfer stripes over
   ``streams_per_transfer`` of them, so the pool serves ``connections // k`` transfers), then
   processor sharing over the line, each transfer capped at ``k`` x one TCP connection's rate
   (``tcp``), RTT (and slow start on fresh connections) on delivery. Routing is the plan's
   (``planned_route``: each request's path fixed up front; with ``policy.router:
   hit_threshold`` the report's rule fixes it the same way), or with ``policy.router: backlog``
   a rule applied when each request's KV is ready; the DRC (hashed traces) acts then too.
4. **Decode** - continuous batching on RLD and MD in fluid steps, the relay and the handoff.

What is measured and summarized lives in ``result``; the entry points (``run``, ``verify``)
in ``run``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.pieces import ReplaySetup
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.scenario import SLA, Policy
from pdd_plan.latency.line import transfer
from pdd_plan.perf import layers
from pdd_plan.perf.instance import Instance
from pdd_plan.sim import handoff_table, setup
from pdd_plan.sim.decode.decoder import DecodeInputs, DecodeResult, Engine, run_decode
from pdd_plan.sim.queues import (
    P_RLD,
    P_RLD_MD,
    DRCHook,
    LineInputs,
    LineStats,
    Progress,
    Router,
    fifo_least_loaded,
    run_line,
)
from pdd_plan.sim.result import SimResult
from pdd_plan.sim.setup import PlanLike
from pdd_plan.sim.timings import ExtendTable, PrefillTimes, StepTable, max_batch
from pdd_plan.workload.cache import PrefixCache


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
        b = max(max_batch(inst, ref_ctx, tpot_s), 1)
        e = Engine(StepTable(inst, *ctx_range, b), b, float(inst.kv_pool_bytes))
        out += [e] * c
    return out, [e.bmax for e in out]


@dataclass
class Prefilled:
    """Stage 1's output: per request its instance, start, service and KV-ready times, and the
    RDMA time its KV takes out of that instance."""

    server: np.ndarray
    start: np.ndarray
    service: np.ndarray
    ready: np.ndarray
    rdma: np.ndarray
    full_kv: np.ndarray


@dataclass
class Moved:
    """Stages 2-3: each request's path, when its KV is at (main) decode, and the line figures."""

    route: np.ndarray
    t_md: np.ndarray
    hit_d: np.ndarray
    line_bytes: np.ndarray
    conn_start: np.ndarray | None = None
    stats: LineStats | None = None
    cap_bps: float | None = None
    pool: int | None = None
    usable_bps: float | None = None  # min(line, pool x per-transfer rate)
    connections: int | None = None  # TCP connections; pool = transfers at once
    streams: int = 1  # connections one transfer holds


def _prefill(
    model: ModelProfile, chunk: int, fl: setup.Fleet, r, progress: Progress | None, n: int
) -> Prefilled:
    """Stage 1 for the first ``n`` requests of ``r``; the service tables span all of ``r``."""
    inp_all = r.input_tokens.astype(float)
    hit_p = np.nan_to_num(r.hit_p, nan=0.0)
    types, counts = _groups(fl.prefill)
    cached = np.floor(inp_all * hit_p)
    new = np.maximum(inp_all - cached, 1.0)
    services = [PrefillTimes(t, chunk)(new, cached)[:n] for t in types]
    inp = inp_all[:n]
    start, server = fifo_least_loaded(r.arrival_s[:n], services, counts, progress)
    grp = np.repeat(np.arange(len(types)), counts)[server]
    service = np.choose(grp, services) if len(types) > 1 else services[0]
    full_kv = np.asarray(layers.kv_bytes(model, inp), dtype=float)
    rdma_by_type = [
        transfer.rdma_transfer_s(
            full_kv,
            t.n_gpus,
            t.gpu.interconnect.rdma_gbps_per_gpu,
            t.gpu.efficiency.comm_efficiency,
        )
        for t in types
    ]
    rdma = np.choose(grp, rdma_by_type) if len(types) > 1 else rdma_by_type[0]
    return Prefilled(server, start, service, start + service, rdma, full_kv)


def _drc_hook(model: ModelProfile, fl: setup.Fleet, reqs: setup.SimRequests) -> DRCHook:
    r, n = reqs.req, len(reqs)
    inp = r.input_tokens.astype(float)
    md_tokens = sum(i.kv_capacity_tokens for i in fl.decode)
    return DRCHook(
        PrefixCache.from_tokens(int(md_tokens), reqs.block_tokens),
        reqs.flat,  # type: ignore[arg-type]
        reqs.offsets,  # type: ignore[arg-type]
        r.input_tokens.tolist(),
        transfer.line_bytes(model, inp, np.zeros(n), False).tolist(),
        layers.kv_bytes_per_token(model),
        [math.nan] * n,
    )


def planned_route(
    hit_p: np.ndarray,
    output_tokens: np.ndarray,
    relay_below: float | None,
    singular_max: int | None,
) -> np.ndarray:
    """The plan's routing per request (a :class:`Route`): relay when the prefill-side hit is at
    or below the plan's threshold (the optimizer relays whole hit-rate classes, so this sends
    the share it planned), finishing on relay decode when the output is at most
    ``singular_max`` tokens; every other request goes P -> MD."""
    route = np.zeros(len(hit_p), dtype=np.int8)
    if relay_below is None:
        return route
    relay = np.nan_to_num(np.asarray(hit_p, dtype=float), nan=0.0) <= relay_below
    route[relay] = P_RLD_MD
    if singular_max is not None:
        route[relay & (np.asarray(output_tokens) <= singular_max)] = P_RLD
    return route


def _backlog_router(fl: setup.Fleet, r, pol, sla) -> Router:
    """``policy.router: backlog``: relay when the line's backlog predicts a TTFT miss."""
    # short requests finish on relay decode only where the architecture has that path
    lim = pol.singular_max_output_tokens if setup.spec(fl.architecture).singular_on_relay else None
    return Router(
        r.arrival_s.tolist(),
        r.output_tokens.astype(np.int64).tolist(),
        sla.ttft_p90_s,
        -1 if lim is None else lim,
    )


def _move_kv(
    model: ModelProfile,
    pol: Policy,
    sla: SLA,
    fl: setup.Fleet,
    reqs: setup.SimRequests,
    pf: Prefilled,
    progress,
) -> Moved:
    """KV to decode: over RDMA without a line; else over the line, routed when KV is ready."""
    r, n = reqs.req, len(reqs)
    hit_d = np.asarray(r.hit_d, dtype=float).copy()
    ln = fl.line
    if ln is None:
        hit_d[:] = np.nan
        return Moved(np.zeros(n, dtype=np.int8), pf.ready + pf.rdma, hit_d, pf.full_kv)
    inp = r.input_tokens.astype(float)
    router, planned = None, None
    if fl.relay and pol.router == "backlog":
        router = _backlog_router(fl, r, pol, sla)
    elif fl.relay and pol.router == "hit_threshold":  # the report's rule, whatever the plan
        lim = (
            pol.singular_max_output_tokens
            if setup.spec(fl.architecture).singular_on_relay
            else None
        )
        at = pol.relay_hit_threshold.at_or_below
        planned = planned_route(r.hit_p, r.output_tokens, at, lim)
    elif fl.relay:
        planned = planned_route(r.hit_p, r.output_tokens, fl.relay_below, fl.singular_max)
    hook = _drc_hook(model, fl, reqs) if reqs.hashes and pol.drc else None
    sizes = None
    if hook is None:
        sizes = transfer.line_bytes(model, inp, np.nan_to_num(hit_d), pol.drc)
        if planned is not None:  # p_rld sends nothing (run_line skips a negative size)
            sizes = np.where(planned == P_RLD, -1.0, sizes)
    ln = _loaded(ln, pf, sizes, hook)
    pool = ln.pool
    # the setup and the sender's copy out of GPU memory come before the line
    pre = ln.pre_line_s(sizes if sizes is not None else pf.full_kv)
    entry = pf.ready + pre
    order = np.argsort(entry, kind="stable")
    rtt = ln.sku.rtt_ms / 1e3
    li = LineInputs(
        entry[order],
        order,
        sizes,
        ln.capacity_bytes_s,
        ln.flow_cap_bytes_s,
        pool,
        rtt,
        router,
        hook,
        planned,
    )
    conn_start, end, line_bytes, route, stats = run_line(li, progress)
    if hook is not None:
        hit_d = np.asarray(hook.held_tokens) / np.maximum(inp, 1.0)
    elif not pol.drc:
        hit_d[:] = 0.0
    p_rld = route == P_RLD
    hit_d[p_rld] = np.nan
    line_bytes = np.where(p_rld, 0.0, line_bytes)
    # slow start on delivery (the connection is not held for it: a latency, not line time)
    ramp = _ramp(ln, line_bytes, conn_start, end, pf.server, stats)
    mv = Moved(route, end + rtt + ramp, hit_d, line_bytes, conn_start, stats)
    mv.cap_bps, mv.pool, mv.usable_bps = ln.capacity_bytes_s, pool, ln.usable_bytes_s
    mv.connections, mv.streams = ln.connections, ln.streams
    return mv


def _loaded(
    ln: transfer.LineConfig,
    pf: Prefilled,
    sizes: np.ndarray | None,
    hook: DRCHook | None,
) -> transfer.LineConfig:
    """The line at the replay's offered load (:meth:`LineConfig.loaded`, as the law takes it
    at the plan's): the bytes offered over the span of KV readiness, of its usable capacity.
    Sized by the DRC as the replay goes, the full KV stands in (an upper bound on the load)."""
    if ln.sku.congestive_loss_rate <= 0 or len(pf.ready) < 2:
        return ln
    x = np.asarray(sizes if sizes is not None else pf.full_kv, dtype=float)
    if hook is not None:
        x = np.asarray(hook.full_bytes, dtype=float)
    span = float(np.max(pf.ready) - np.min(pf.ready))
    if span <= 0:
        return ln
    rho = float(np.sum(x[x > 0])) / span / ln.usable_bytes_s
    return ln.loaded(rho)[0]


def _ramp(
    ln: transfer.LineConfig,
    line_bytes: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    server: np.ndarray,
    stats: LineStats,
) -> np.ndarray:
    """Each transfer's slow-start penalty: every transfer's (``every_transfer``); the first
    transfer of each connection the pool opens (``first_use``); or (``after_idle``) the
    restart after its connections' idle gap, each prefill instance (the sender) keeping its
    own: the time since that sender's previous transfer left the line (never used: cold)."""
    n = len(line_bytes)
    mode = ln.sku.slow_start
    if mode == "every_transfer":
        return ln.slow_start_s(line_bytes)
    ramp = np.zeros(n)
    if mode == "first_use":  # persistent connections: only each connection's first transfer
        f = np.asarray(stats.fresh, dtype=np.int64)
        ramp[f] = ln.slow_start_s(line_bytes[f])
        return ramp
    moved = np.flatnonzero(~np.isnan(start) & (line_bytes > 0))
    if moved.size == 0:
        return ramp
    srv = np.asarray(server)[moved]
    o = np.lexsort((moved, start[moved], srv))  # by sender, then by start
    k, s_k = moved[o], srv[o]
    first = np.concatenate([[True], s_k[1:] != s_k[:-1]])
    # a sender's first transfer has no previous one (not the previous sender's last)
    prev_end = np.where(first, np.nan, np.concatenate([[np.nan], end[k][:-1]]))
    # the sender's latest end so far (a later-started transfer may end first)
    idle = np.where(first, np.inf, start[k] - _running_max(prev_end, first))
    ramp[k] = ln.idle_slow_start_s(line_bytes[k], np.maximum(idle, 0.0))
    return ramp


def _running_max(x: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``x``'s running maximum, restarting where ``first`` (NaN at a group's start)."""
    grp = np.cumsum(first)
    out = np.empty_like(x)
    y = np.where(np.isnan(x), -np.inf, x)
    for g in np.unique(grp):  # one pass per sender: a few dozen prefill instances
        m = grp == g
        out[m] = np.maximum.accumulate(y[m])
    return out


def _decode(
    model: ModelProfile,
    pol: Policy,
    sla: SLA,
    fl: setup.Fleet,
    reqs: setup.SimRequests,
    pf: Prefilled,
    mv: Moved,
    progress,
    basis: setup.SimRequests,
    chunk: int = 8192,
) -> tuple[DecodeResult, list[int]]:
    """Stage 4 for ``reqs``; the step and extend tables (and the batch caps) are those of
    ``basis``, the requests ``reqs`` is the head of."""
    r = reqs.req
    inp = r.input_tokens.astype(float)
    out = r.output_tokens.astype(np.int64)
    tpot = sla.tpot_ms / 1e3
    step_ctx = inp + out / 2.0
    b_ctx = basis.req.input_tokens.astype(float) + basis.req.output_tokens.astype(np.int64) / 2.0
    ctx_pts = (float(b_ctx.min()), float(b_ctx.max()))
    ref = float(b_ctx.mean())
    md_eng, md_b = _engines(fl.decode, ctx_pts, ref, tpot)
    relay = fl.relay
    rld_eng, rld_b = _engines(relay, ctx_pts, ref, tpot) if relay else ([], [])
    cap = int(pol.relay_max_tokens)
    ext = None
    payload = handoff_table.payload(pol, fl)
    if relay:
        b_inp = basis.req.input_tokens.astype(float)
        ctxs = np.unique(np.quantile(b_inp, [0, 0.5, 1]).round())
        price, tag = handoff_table.price(payload, fl, md_b[0], chunk, mv.stats)
        ext = ExtendTable(fl.decode[0], cap, ctxs, price, tag)
    di = DecodeInputs(
        route=mv.route,
        t_md=mv.t_md,
        t_rld=pf.ready + pf.rdma,
        output_tokens=out,
        step_ctx=step_ctx,
        ext_ctx=inp,
        kv_md=np.asarray(layers.kv_bytes(model, inp + out), dtype=float),
        kv_rld=np.asarray(layers.kv_bytes(model, inp + np.minimum(out, cap)), dtype=float),
        md=md_eng,
        rld=rld_eng,
        extend=ext,
        relay_cap=cap,
        one_shot=pol.handoff == "one_shot",
        # the token IDs' one-way trip (a KV payload's own transfer time includes its delivery)
        ids_latency_s=fl.line.sku.rtt_ms / 2e3 if fl.line is not None and payload != "kv" else 0.0,
    )
    return run_decode(di, progress), md_b + rld_b


def replay_requests(
    replay_setup: ReplaySetup,
    plan: PlanLike,
    architecture: str,
    reqs: setup.SimRequests,
    seed: int = 0,
    progress: Progress | None = None,
    upto: int | None = None,
) -> SimResult:
    """Replay ``reqs`` on one architecture of ``plan`` (a Plan or one ArchitecturePlan).

    ``upto``: replay only the first ``upto`` requests, on the tables (prefill service, decode
    step and extend, batch caps) all of ``reqs`` would use, so every event before the first
    request left out arrives is the full replay's (``sim.sequential``'s looks rely on it)."""
    profiles, pol, sla = replay_setup.profiles, replay_setup.policy, replay_setup.sla
    arch_plan = setup.arch_plan(plan, architecture)
    fl = setup.fleet(profiles, replay_setup.file, arch_plan, architecture)
    basis = reqs
    if upto is not None and upto < len(reqs):
        reqs = setup.head(reqs, upto)
    r = reqs.req
    if len(r) == 0:
        raise InputError(None, "--requests", "nothing to simulate", "give at least one request")
    model = profiles.model
    pf = _prefill(model, replay_setup.prefill_chunk_tokens, fl, basis.req, progress, len(r))
    mv = _move_kv(model, pol, sla, fl, reqs, pf, progress)
    chunk = replay_setup.prefill_chunk_tokens
    dec, bmax = _decode(model, pol, sla, fl, reqs, pf, mv, progress, basis, chunk)
    return SimResult(
        architecture=architecture,
        source=reqs.source,
        seed=seed,
        sla=sla.model_dump(),
        arrival_s=r.arrival_s,
        input_tokens=r.input_tokens,
        output_tokens=r.output_tokens.astype(np.int64),
        hit_p=np.nan_to_num(r.hit_p, nan=0.0),
        hit_d=mv.hit_d,
        route=mv.route.astype(np.int64),
        prefill_instance=pf.server,
        prefill_start_s=pf.start,
        prefill_s=pf.service,
        kv_ready_s=pf.ready,
        line_bytes=mv.line_bytes,
        kv_at_decode_s=np.where(mv.route == P_RLD, np.nan, mv.t_md),
        dec=dec,
        line=mv.stats,
        line_capacity_bytes_s=mv.cap_bps,
        line_usable_bytes_s=mv.usable_bps,
        pool_size=mv.pool,
        pool_connections=mv.connections,
        streams_per_transfer=mv.streams,
        conn_start_s=mv.conn_start,
        prefill_count=len(fl.prefill),
        decode_bmax=bmax,
        relay_count=len(fl.relay),
    )
