"""Roofline timing of forward passes: prefill chunks, decode steps, extend.

A pass runs its GEMMs (weights x tokens) and its attention kernels (queries x cached KV) one
after the other, and each kernel class is bound by its own roofline:

    c = FLOPs / (peak * mfu),  m = bytes / (bw * mbu)
    gemm class = (c^p + m^p)^(1/p)       non-expert GEMMs; routed-expert GEMMs (busiest rank)
    attn = max(c, m)                     at the KV dtype's peak
    time(pass) = sum of the classes + exposed TP/EP communication + step overhead

p (moe-serving.yaml gemm_roofline) rounds the roofline's corner: a GEMM near its ridge (a
grouped expert GEMM of a few hundred tokens per expert) reaches neither rate, one far from it
(a decode GEMM of 64 rows, a long prefill chunk) the binding one. A decode step's GEMMs can be
compute-bound while its attention streams KV: the classes do not overlap, which a single
max(FLOPs, bytes) over the whole pass would pretend. Communication comes from comm.py; how much
of it overlap hides, from overlap.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from pdd_plan.common.search import largest_meeting
from pdd_plan.perf import comm, layers, moe_terms, overlap
from pdd_plan.perf.instance import Instance, same_profiles, shape_key


@dataclass(frozen=True)
class PassTime:
    """Seconds of one forward pass (or a sum of passes).

    compute_s / memory_s: all FLOPs at the achieved FLOP rate and all HBM bytes at the achieved
    bandwidth; compute_bound_s / memory_bound_s: the time of the kernels that are compute-bound
    and of those that are memory-bound. communication_s is the link time of the pass's
    all-to-all and all-reduces; hidden_communication_s the part of it that two-batch overlap
    hides behind the other micro-batch's kernels (comm.py). compute-bound + memory-bound +
    exposed communication + overhead is the total. `mode` says whether the efficiency factors
    behind it are the GPU profile's analytic defaults or fitted by `pdd-plan calibrate`.
    Built from the first four numbers only, the total is max(compute, memory) + communication
    + overhead.
    """

    compute_s: float
    memory_s: float
    communication_s: float
    overhead_s: float
    mode: str = "analytic"
    compute_bound_s: float | None = None
    memory_bound_s: float | None = None
    hidden_communication_s: float = 0.0

    def _bound_split(self) -> tuple[float, float]:
        if self.compute_bound_s is not None and self.memory_bound_s is not None:
            return self.compute_bound_s, self.memory_bound_s
        if self.compute_s > self.memory_s:
            return self.compute_s, 0.0
        return 0.0, self.memory_s

    @property
    def exposed_communication_s(self) -> float:
        """Communication on the critical path (all of it without two-batch overlap)."""
        return self.communication_s - self.hidden_communication_s

    @property
    def total_s(self) -> float:
        cb, mb = self._bound_split()
        return cb + mb + self.exposed_communication_s + self.overhead_s

    @property
    def bound(self) -> str:
        """compute | memory | communication: the resource that takes most of the pass."""
        cb, mb = self._bound_split()
        parts = {"compute": cb, "memory": mb, "communication": self.exposed_communication_s}
        return max(parts, key=parts.get)  # type: ignore[arg-type]

    def __add__(self, other: PassTime) -> PassTime:
        a, b = self._bound_split(), other._bound_split()
        return PassTime(
            self.compute_s + other.compute_s,
            self.memory_s + other.memory_s,
            self.communication_s + other.communication_s,
            self.overhead_s + other.overhead_s,
            self.mode,
            a[0] + b[0],
            a[1] + b[1],
            self.hidden_communication_s + other.hidden_communication_s,
        )

    def scaled(self, k: float) -> PassTime:
        """k passes like this one."""
        cb, mb = self._bound_split()
        return PassTime(
            self.compute_s * k,
            self.memory_s * k,
            self.communication_s * k,
            self.overhead_s * k,
            self.mode,
            cb * k,
            mb * k,
            self.hidden_communication_s * k,
        )

    def as_dict(self) -> dict[str, float | str]:
        cb, mb = self._bound_split()
        d = {**asdict(self), "compute_bound_s": cb, "memory_bound_s": mb}
        d["exposed_communication_s"] = self.exposed_communication_s
        return {**d, "total_s": self.total_s, "bound": self.bound}


@dataclass(frozen=True)
class Work:
    """What one pass computes and streams, before the roofline turns it into seconds."""

    tokens: float  # tokens the pass carries (all GPUs)
    gemm_routed: float = 0.0  # FLOPs of routed-expert GEMMs
    gemm_other: float = 0.0  # FLOPs of every other GEMM (attention projections, dense FFN, head)
    attn: float = 0.0  # attention-kernel FLOPs
    kv: float = 0.0  # KV bytes read and written
    requests: float = 0.0  # requests the pass carries (decode rows + prefill sequences)
    # LM-head FLOPs of gemm_other that engines skip: a prefill computes the logits of its last
    # token only (SGLang's LogitsProcessor prunes to the last position of each sequence; vLLM
    # computes logits at the sampled positions)
    head_skipped: float = 0.0

    def __add__(self, o: Work) -> Work:
        return Work(
            self.tokens + o.tokens,
            self.gemm_routed + o.gemm_routed,
            self.gemm_other + o.gemm_other,
            self.attn + o.attn,
            self.kv + o.kv,
            self.requests + o.requests,
            self.head_skipped + o.head_skipped,
        )

    def half(self) -> Work:
        return Work(
            self.tokens / 2,
            self.gemm_routed / 2,
            self.gemm_other / 2,
            self.attn / 2,
            self.kv / 2,
            self.requests / 2,
            self.head_skipped / 2,
        )


# distinct experts a pass touches: moe_terms owns it (the grouped GEMM's tokens per expert)
expected_experts_touched = moe_terms.expected_experts_touched


def _weight_bytes_split(inst: Instance, tokens: float) -> tuple[float, float]:
    """(non-expert, routed-expert) weight bytes one pass over `tokens` tokens streams from HBM
    (all GPUs together)."""
    m, w = inst.model, inst.weights
    dense = w["streamed_dense"]  # the embedding table is only looked up
    # attention weights are replicated across DP groups: each group streams its own copy
    dense += inst.params.attention * layers.DTYPE_BYTES[inst.compute_dtype] * (inst.dp - 1)
    if m.ffn.moe is None:
        return dense, 0.0
    moe = m.ffn.moe
    touched = expected_experts_touched(tokens, inst.expert_slots, moe.experts_per_token)
    return dense, inst.params.moe_layers * touched * w["expert_bytes"]


def _token_work(inst: Instance, tokens: float) -> Work:
    """GEMM FLOPs of `tokens` tokens, split into routed experts and the rest."""
    per = 2.0 * inst.params.active  # = layers.weight_flops_per_token, cached on the instance
    routed = 2.0 * inst.params.routed_active
    return Work(tokens, routed * tokens, (per - routed) * tokens)


def _kernels(inst: Instance, w: Work) -> tuple[float, float, float, float, tuple]:
    """(compute s, memory s, compute-bound s, memory-bound s, rates) of one pass's kernels;
    rates = (s per FLOP of the non-expert GEMMs, of the routed-expert GEMMs, attention kernel
    s), what overlap.cover_seconds splits into compute classes.

    Three kernel classes run one after another: the non-expert GEMMs (their FLOPs against the
    dense weight bytes), the routed-expert GEMMs (the busiest EP rank's FLOPs,
    `expert_imbalance` times the mean, against the touched experts' bytes) and attention
    (FLOPs against the KV bytes). A GEMM class takes moe_terms.kernel_seconds(c, m), its FLOP
    time c and byte time m with the roofline's corner rounded (DeepGEMM's shapes); attention
    takes max(c, m) at the latent kernels' measured fractions (or the fitted ones for GQA).
    Routed experts run on the tensor cores of their own dtype (NVFP4 experts under FP8
    attention). A class counts as compute-bound when c >= m.
    """
    g, e, n = inst.gpu, inst.efficiency, inst.n_gpus
    rate = n * g.peak_flops(inst.compute_dtype) * e.mfu
    rate_routed = rate * g.peak_flops(inst.expert_dtype) / g.peak_flops(inst.compute_dtype)
    # attention kernels at their measured fractions of peak (kinds not listed: the fitted ones)
    a_mfu, a_mbu = moe_terms.attention_fractions(inst.model) or (e.mfu, e.mbu)
    attn_rate = n * g.peak_flops(inst.model.kv_cache.dtype) * a_mfu
    bw = n * g.memory.hbm_tbps * 1e12 * e.mbu
    attn_bw = n * g.memory.hbm_tbps * 1e12 * a_mbu
    imbalance = moe_terms.expert_imbalance(inst, w.tokens)
    other = w.gemm_other - w.head_skipped
    b_other, b_routed = _weight_bytes_split(inst, w.tokens)
    c_o, m_o = other / rate, b_other / bw
    c_r, m_r = w.gemm_routed * imbalance / rate_routed, b_routed / bw
    ca, ma = w.attn / attn_rate, w.kv / attn_bw
    t_o, t_r = float(moe_terms.kernel_seconds(c_o, m_o)), float(moe_terms.kernel_seconds(c_r, m_r))
    t_a = max(ca, ma)
    rates = (
        t_o / other if other > 0 else 0.0,
        t_r / w.gemm_routed if w.gemm_routed > 0 else 0.0,
        t_a,
    )
    cb = mb = 0.0
    for c, mem, t in ((c_o, m_o, t_o), (c_r, m_r, t_r), (ca, ma, t_a)):
        if c >= mem and c > 0:
            cb += t
        else:
            mb += t
    return c_o + c_r + ca, m_o + m_r + ma, cb, mb, rates


def _pass(inst: Instance, w: Work, phase: str) -> PassTime:
    """Seconds of one pass: kernels, communication (hidden in part by overlap) and the step
    overhead.

    Two-batch overlap runs two micro-batches of half the work: the split's efficiency loss
    (smaller GEMMs, weights streamed twice) stays in the kernel time, and each dispatch and
    combine hides behind the compute its schedule runs it under (overlap.py). Left to the
    engine default (`two_batch_overlap` None on an instance where the default allows it), a
    pass overlaps only when that is faster, as a deployment turns the flag on where the
    all-to-all matters (large EP) and not where the second weight read costs more than it
    hides. Single-batch overlap keeps the batch whole and hides only the combine.
    """
    e = inst.efficiency
    a2a = comm.a2a_seconds(inst, w.tokens, phase, moe_terms.expert_imbalance(inst, w.tokens))
    if a2a > 0:  # each dispatch and combine call also pays a fixed latency
        a2a += moe_terms.deepep_fixed_seconds(inst, phase)
    ar = comm.allreduce_seconds(inst, w.tokens) + moe_terms.allreduce_fixed_seconds(inst)
    # each kernel's fixed time on top of its roofline time (alpha-beta): latency-bound
    floor = moe_terms.kernel_floor_seconds(inst)
    c, mem, cb, mb, rates = _kernels(inst, w)
    mb += floor
    over = e.step_overhead_ms / 1e3 + moe_terms.step_cpu_seconds(inst, w.requests)
    plain = PassTime(c, mem, a2a + ar, over, e.mode, cb, mb, 0.0)
    if a2a <= 0 or not (inst.tbo or inst.single_batch_overlap):
        return plain
    dispatch = a2a * comm.dispatch_share(inst)
    if inst.single_batch_overlap:
        covers = overlap.cover_seconds(inst, w.tokens, w.gemm_other, w.gemm_routed, rates)
        shown = overlap.exposed_single_batch(inst, dispatch, a2a - dispatch, covers, phase)
        return PassTime(c, mem, a2a + ar, over, e.mode, cb, mb, a2a - shown)
    h = w.half()
    c, mem, cb, mb, rates = _kernels(inst, h)
    mb += floor  # each micro-batch runs every kernel
    c, mem, cb, mb = 2.0 * c, 2.0 * mem, 2.0 * cb, 2.0 * mb
    covers = overlap.cover_seconds(inst, h.tokens, h.gemm_other, h.gemm_routed, rates)
    covers = {k: 2.0 * v for k, v in covers.items()}
    shown = overlap.exposed_two_batch(inst, dispatch, a2a - dispatch, covers, phase)
    tbo = PassTime(c, mem, a2a + ar, over, e.mode, cb, mb, a2a - shown)
    if inst.two_batch_overlap is None and plain.total_s <= tbo.total_s:
        return plain
    return tbo


def _prefill_work(inst: Instance, seqs: float, new_tokens: float, before: float) -> Work:
    """Work of `seqs` sequences each prefilling `new_tokens` tokens on top of `before` cached."""
    m = inst.model
    if seqs <= 0 or new_tokens <= 0:
        return Work(0.0)
    w = _token_work(inst, seqs * new_tokens)
    head = 2.0 * inst.params.lm_head_matmul * seqs * max(new_tokens - 1.0, 0.0)
    attn, expand = layers.prefill_attention_flops(m, new_tokens, before)
    # cached KV is read once per pass (x replication when every TP rank holds the latent);
    # the new tokens' KV is written
    kv_read = float(layers.kv_bytes(m, before))
    kv_write = float(layers.kv_bytes(m, before + new_tokens)) - kv_read
    kv = seqs * (kv_read + kv_write) * inst.kv_replication
    return w + Work(0.0, 0.0, seqs * expand, seqs * attn, kv, seqs, head)


def _decode_work(inst: Instance, batch: float, attn: float, kv: float) -> Work:
    return _token_work(inst, batch) + Work(0.0, 0.0, 0.0, attn, kv * inst.kv_replication, batch)


def mixed_pass(
    inst: Instance,
    decode_batch: float = 0.0,
    decode_context: float = 0.0,
    prefill_seqs: float = 0.0,
    prefill_new: float = 0.0,
    prefill_cached: float = 0.0,
) -> PassTime:
    """One forward pass that carries `decode_batch` decode tokens (each at `decode_context`) and
    `prefill_seqs` prefill chunks of `prefill_new` tokens on `prefill_cached` cached ones
    (continuous batching with chunked prefill: weights are streamed once for all of them).
    A pass with decode tokens uses the low-latency all-to-all kernels, a pure prefill pass the
    normal ones."""
    m = inst.model
    w = _prefill_work(inst, prefill_seqs, prefill_new, prefill_cached)
    if decode_batch > 0:
        attn = float(layers.attention_flops_per_token(m, decode_context, "decode")) * decode_batch
        kv = float(layers.attention_bytes_per_token(m, decode_context)) * decode_batch
        w = w + _decode_work(inst, decode_batch, attn, kv)
    return _pass(inst, w, "decode" if decode_batch > 0 else "prefill")


def chunk_time(inst: Instance, new_tokens: float, context_before: float) -> PassTime:
    """One prefill/extend pass of `new_tokens` tokens on top of `context_before` cached ones."""
    return mixed_pass(inst, prefill_seqs=1.0, prefill_new=new_tokens, prefill_cached=context_before)


# prefill_time by (instance value, tokens, chunk): every sweep point and regime cell of one
# workload asks for the same strata on freshly loaded, equal instances (the report's 25-cell
# map spent half its time here). PassTime is frozen, so a shared result is safe.
_PREFILL_MEMO: dict[tuple, PassTime] = {}
_PREFILL_MEMO_MAX = 1 << 16


def prefill_time(
    inst: Instance, new_tokens: float, cached_tokens: float = 0.0, chunk: int = 8192
) -> PassTime:
    """A request's prefill run alone, in chunks of `chunk` tokens; the short last chunk is slow."""
    key = (inst.value_key, float(new_tokens), float(cached_tokens), chunk)
    hit = _PREFILL_MEMO.get(key)
    if hit is None:
        if len(_PREFILL_MEMO) >= _PREFILL_MEMO_MAX:
            _PREFILL_MEMO.clear()
        hit = _PREFILL_MEMO[key] = _prefill_time(inst, new_tokens, cached_tokens, chunk)
    return hit


def _prefill_time(inst: Instance, new_tokens: float, cached_tokens: float, chunk: int) -> PassTime:
    total = PassTime(0.0, 0.0, 0.0, 0.0, inst.mode)
    done = 0.0
    new_tokens = float(new_tokens)
    while done < new_tokens - 1e-9:
        m = min(chunk, new_tokens - done)
        total = total + chunk_time(inst, m, cached_tokens + done)
        done += m
    return total


def batch_prefill_time(
    inst: Instance, batch: int, new_tokens: float, cached_tokens: float = 0.0, chunk: int = 8192
) -> PassTime:
    """`batch` requests, each `new_tokens` long after `cached_tokens` cached, prefilled together
    with a `chunk`-token budget per pass and DP-attention group (each group schedules its own
    chunk, SGLang's per-rank --chunked-prefill-size): short prompts share a pass, long ones
    are chunked."""
    batch = max(int(batch), 1)
    new_tokens = float(new_tokens)
    chunk = chunk * inst.dp
    if new_tokens >= chunk:
        return prefill_time(inst, new_tokens, cached_tokens, chunk).scaled(batch)
    per_pass = max(1, int(chunk // max(new_tokens, 1.0)))
    full, rest = divmod(batch, per_pass)
    total = mixed_pass(
        inst, prefill_seqs=per_pass, prefill_new=new_tokens, prefill_cached=cached_tokens
    ).scaled(full)
    if rest:
        total = total + mixed_pass(
            inst, prefill_seqs=rest, prefill_new=new_tokens, prefill_cached=cached_tokens
        )
    return total


def extend_time(inst: Instance, k_tokens: float, context: float) -> PassTime:
    """MD recomputing the KV of k relay-generated tokens on top of a cached context (the handoff):
    a prefill of k tokens over a cached `context`. Small k streams all weights and the cached KV
    for few FLOPs, so it is memory-bound and costs about one decode step."""
    return chunk_time(inst, k_tokens, context)


# (shape_key, batch, context) -> (the instance, its decode step): the sizing searches time the
# same steps again on fresh but equal instances (on the default 962 steps, 577 distinct)
_DECODE_MEMO: dict[tuple, tuple[Instance, PassTime]] = {}


def decode_step(inst: Instance, batch: float, context: float | np.ndarray) -> PassTime:
    """One decode step of `batch` requests at mean context `context` (or one context per request)."""
    if np.ndim(context) != 0:
        return _decode_step(inst, batch, context)
    key = (shape_key(inst), float(batch), float(context))
    hit = _DECODE_MEMO.get(key)
    if hit is None or not same_profiles(hit[0], inst):
        if len(_DECODE_MEMO) > 10_000:
            _DECODE_MEMO.clear()
        hit = _DECODE_MEMO[key] = (inst, _decode_step(inst, batch, context))
    return hit[1]


def _decode_step(inst: Instance, batch: float, context: float | np.ndarray) -> PassTime:
    m = inst.model
    ctx = (
        np.broadcast_to(np.asarray(context, dtype=float), (max(int(round(batch)), 1),))
        if np.ndim(context) == 0
        else np.asarray(context, dtype=float)
    )
    b = float(batch) if np.ndim(context) == 0 else float(len(ctx))
    scale = b / len(ctx)
    attn = float(np.sum(layers.attention_flops_per_token(m, ctx, "decode"))) * scale
    kv_read = float(np.sum(layers.attention_bytes_per_token(m, ctx))) * scale
    return _pass(inst, _decode_work(inst, b, attn, kv_read), "decode")


def decode_throughput(inst: Instance, batch: float, context: float) -> float:
    """Output tokens/s of the whole instance decoding `batch` requests at `context`."""
    return float(batch) / decode_step(inst, batch, context).total_s


def max_batch_for_tpot(inst: Instance, context: float, tpot_s: float) -> tuple[int, float]:
    """Largest batch whose step meets `tpot_s` and whose KV fits; (batch, step seconds). (0, t1) if none."""
    seen: dict[int, float] = {}  # each batch's step once (the ends are asked again)

    def step(b: int) -> float:
        if b not in seen:
            seen[b] = decode_step(inst, b, context).total_s
        return seen[b]

    cap = inst.max_batch(context)
    t1 = step(1)
    if cap < 1 or t1 > tpot_s:
        return 0, t1
    lo, hi = 1, cap
    if step(hi) <= tpot_s:
        return hi, step(hi)
    lo = largest_meeting(step, tpot_s, lo, hi)  # step time is monotone in batch
    return lo, step(lo)
