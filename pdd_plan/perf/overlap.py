"""How much of a pass's expert all-to-all hides behind compute, stage by stage.

An engine overlaps a dispatch or combine only with the kernels that its schedule runs while
the transfer is in flight, not with the whole pass. moe-serving.yaml lists, per phase, which
compute classes each transfer runs under (SGLang's two-batch-overlap stages; the single-batch
overlap of the combine with the down GEMM and shared experts). With T the transfer's time and
H the compute it runs under, the part on the critical path is

    exposed = max(s T, T - H)        s: share of SMs the transfer kernels take (comm.py)

summed over the transfers. Every figure is a total over the pass and both micro-batches; the
layers are identical, so per-layer maxima sum to the maximum of the totals. Approximation: a
transfer that waits (a receive stage) is not itself compute that hides another.
"""

from __future__ import annotations

from pdd_plan.perf import comm, layers


def cover_seconds(
    inst, tokens: float, gemm_other: float, gemm_routed: float, rates: tuple[float, float, float]
) -> dict[str, float]:
    """Seconds of each compute class a transfer can hide behind, MoE layers only.

    `rates` = (seconds per FLOP of the non-expert GEMMs, the same for the busiest rank's expert
    GEMMs, seconds of the attention kernels): the roofline's figures for this pass.
    """
    s_other, s_routed, t_attn = rates
    m, p = inst.model, inst.params
    moe_share = p.moe_layers / m.num_layers  # the attention of the MoE layers
    o = layers.output_projection_params(m)
    # prefill over a cached prefix: the latent expansion runs with the projections
    expand = max(gemm_other - 2.0 * (p.active - p.routed_active) * tokens, 0.0)
    prep = (2.0 * (p.attention - o) * tokens + expand) * s_other * moe_share
    core = t_attn * moe_share + (2.0 * o * tokens * moe_share + 2.0 * p.router * tokens) * s_other
    routed = gemm_routed * s_routed
    mats = 3.0 if m.ffn.gated else 2.0
    return {
        "attention_prep": prep,
        "attention_core": core,
        "attention": prep + core,
        "shared_experts": 2.0 * p.shared_experts * tokens * s_other,
        "routed_experts": routed,
        "routed_down": routed / mats,
    }


def _exposed(t: float, hidden_by: float, s: float) -> float:
    return max(s * t, t - hidden_by) if t > 0 else 0.0


def exposed_two_batch(
    inst, dispatch_s: float, combine_s: float, covers: dict[str, float], phase: str
) -> float:
    """Exposed all-to-all seconds of a two-batch-overlap pass (covers of both micro-batches)."""
    tbo = comm.serving().two_batch_overlap
    hides = tbo.prefill if phase == "prefill" else tbo.decode
    total = {"dispatch": dispatch_s, "combine": combine_s}
    n = {k: sum(h.comm == k for h in hides) for k in total}
    s = comm.sm_fraction(phase)
    out = 0.0
    for h in hides:
        k = n[h.comm]
        out += _exposed(total[h.comm] / k, sum(covers[c] for c in h.cover) / k, s)
    return out


def exposed_single_batch(
    inst, dispatch_s: float, combine_s: float, covers: dict[str, float], phase: str
) -> float:
    """Exposed all-to-all seconds with single-batch overlap: the dispatch in full, the combine
    under the classes moe-serving.yaml names."""
    hide = sum(covers[c] for c in comm.serving().single_batch_overlap.cover_combine)
    return dispatch_s + _exposed(combine_s, hide, comm.sm_fraction(phase))
