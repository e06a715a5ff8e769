"""The recompute handoff as the engine schedules it: main decode extends the k relay tokens in a
pass joined to its running decode batch."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from pdd_plan.perf import layers, moe_terms, roofline
from pdd_plan.perf.instance import Instance


@dataclass(frozen=True)
class JoinedExtend:
    """Seconds from the token IDs' arrival at main decode to their KV being there.

    The IDs arrive at a uniform phase of the running decode step (`step_s`), wait for it to end,
    then ride the next passes: each carries the running batch and one chunk of the extend
    (`pass_s`, summed over the chunks). So the time is `pass_s` plus a wait uniform on
    [0, step_s): mean `pass_s + step_s / 2`, worst `pass_s + step_s`, standard deviation
    `step_s / sqrt(12)`."""

    step_s: float  # the running batch's decode step
    pass_s: float  # the joined passes that carry the extend's chunks
    chunks: int
    rank_attention_s: float  # the extend's attention on its one DP-attention group, per pass sum

    @property
    def mean_s(self) -> float:
        return self.pass_s + 0.5 * self.step_s

    @property
    def max_s(self) -> float:
        return self.pass_s + self.step_s

    @property
    def sd_s(self) -> float:
        return self.step_s / math.sqrt(12.0)


def joined_extend(
    inst: Instance,
    k_tokens: float,
    context: float,
    batch: float,
    decode_context: float,
    chunk_tokens: int = 8192,
) -> JoinedExtend:
    """The k-token extend over a cached `context` joined to a running decode batch of `batch`
    requests at `decode_context` on `inst` (SGLang's mixed chunked prefill: the extend is
    scheduled as a prefill chunk of at most `chunk_tokens` per DP-attention group, in the same
    forward pass as the decode rows).

    Why more than `roofline.extend_time` (a lone pass): (1) the pass also carries the running
    batch, so the extend waits for the step in flight and then takes a whole mixed pass, not an
    extend alone; (2) with DP attention the extend is one request, scheduled on one attention
    group of tp/dp GPUs, and every group steps together (the MoE all-to-all synchronizes them),
    so its attention over the cached context runs on that group alone while `mixed_pass`
    spreads attention over every GPU; the excess is added to the pass."""
    k = max(float(k_tokens), 1.0)
    step = _step_s(inst, batch, decode_context)
    per_pass = max(int(chunk_tokens), 1)
    a_mfu = (moe_terms.attention_fractions(inst.model) or (inst.efficiency.mfu, 0.0))[0]
    rate = inst.gpu.peak_flops(inst.model.kv_cache.dtype) * a_mfu  # one GPU's attention FLOP/s
    done, total, rank_attn, chunks = 0.0, 0.0, 0.0, 0
    while done < k - 1e-9:
        n = min(float(per_pass), k - done)
        p = roofline.mixed_pass(inst, batch, decode_context, 1.0, n, context + done)
        attn, _ = layers.prefill_attention_flops(inst.model, n, context + done)
        on_rank = attn / (inst.attn_tp * rate)
        excess = on_rank - attn / (inst.n_gpus * rate)  # what mixed_pass did not charge
        total += p.total_s + max(excess, 0.0)
        rank_attn += on_rank
        done += n
        chunks += 1
    return JoinedExtend(step, total, chunks, rank_attn)


# objects an instance holds by reference, keyed by identity (pydantic models are not hashable;
# the memos' entries keep them alive, so an id stays theirs)
_BY_ID = ("model", "gpu", "limits")


def shape_key(inst: Instance) -> tuple:
    """What the perf model reads from `inst`, cheap and hashable: its profiles by identity,
    every other field by value. Equal keys, equal timings: the uncertainty draws build a fresh
    instance for every fleet they check, on the same (memoized) profiles of the draw, so an
    instance's identity misses where this key hits."""
    return tuple(
        id(getattr(inst, f.name)) if f.name in _BY_ID else getattr(inst, f.name)
        for f in dataclasses.fields(inst)
    )


def same_profiles(a: Instance, b: Instance) -> bool:
    """Whether `a` holds the very profiles `b` does (a `shape_key` hit is one only then)."""
    return all(getattr(a, f) is getattr(b, f) for f in _BY_ID)


# (shape_key, batch, context) -> (the instance, its decode step seconds): the draws price the
# extend at up to `relay_max_tokens` k for one running batch, each joined to the same step
_STEPS: dict[tuple, tuple[Instance, float]] = {}


def _step_s(inst: Instance, batch: float, context: float) -> float:
    """`roofline.decode_step(inst, batch, context).total_s`, memoized by value."""
    key = (shape_key(inst), float(batch), float(context))
    hit = _STEPS.get(key)
    if hit is None or not same_profiles(hit[0], inst):
        if len(_STEPS) > 10_000:
            _STEPS.clear()
        hit = _STEPS[key] = (inst, roofline.decode_step(inst, batch, context).total_s)
    return hit[1]
