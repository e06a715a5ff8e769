"""The terms that make a serving pass slower than its roofline, each from moe-serving.yaml.

* expert load imbalance by EP size and tokens per step: the busiest EP rank's routed tokens
  over the mean, a systematic part (routing popularity; what EPLB's redundant experts even out,
  measured at large batch) times a statistical part (the largest of ep rank counts drawn around
  their mean mu = tokens x k / ep, Poisson-like: 1 + sqrt(2 ln ep / mu), the Gaussian extreme
  value; it vanishes at large batch and dominates a small one);
* the rounded roofline corner of every GEMM, dense or grouped (DeepGEMM's shapes): a GEMM
  near its ridge (a grouped expert GEMM of a few hundred tokens per expert) runs at neither
  its FLOP nor its byte rate; the grouped GEMM's efficiency by tokens per expert follows;
* DeepEP's fixed latency per dispatch and combine call, inside a node or across nodes;
* the engine's per-step CPU cost that grows with the requests in a pass, per DP rank;
* attention kernel efficiency (MLA, DSA, compressed, GQA): measured fractions of peak;
* a pass's fixed cost from its structure (fixed_cost.py): each kernel's floor and each
  collective call's latency on top of their work (most of a batch-1 decode step, a few per cent
  at large batch).

Pure functions of an instance and a pass's size; `breakdown` gathers them for `perf`.
"""

from __future__ import annotations

import math

import numpy as np

from pdd_plan.perf import fixed_cost
from pdd_plan.perf.comm import serving


def expected_experts_touched(tokens: float, num_experts: int, k: int) -> float:
    """Distinct experts (per MoE layer) that `tokens` tokens, each routed to k of E uniformly, touch."""
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - k / num_experts) ** tokens)


def statistical_imbalance(ep: int, copies: float) -> float:
    """1 + sqrt(2 ln ep / mu): the expected largest of `ep` rank loads over their mean when
    `copies` token copies fall on ep ranks at random (mu = copies / ep per rank)."""
    if ep <= 1 or copies <= 0:
        return 1.0
    return 1.0 + math.sqrt(2.0 * math.log(ep) / (copies / ep))


def expert_imbalance(inst, tokens: float) -> float:
    """Busiest EP rank's routed tokens over the mean in a pass of `tokens` tokens (all GPUs):
    the instance's stated load (a row that simulated balanced routing: exactly that), else the
    systematic part (moe-serving.yaml, with or without EPLB) times the statistical one."""
    if inst.expert_load is not None:
        return float(inst.expert_load)
    moe = inst.model.ffn.moe
    if moe is None or inst.ep <= 1:
        return 1.0
    return inst.expert_imbalance * statistical_imbalance(inst.ep, tokens * moe.experts_per_token)


def grouped_gemm_fractions(inst, tokens_per_expert: float, imbalance: float) -> tuple[float, float]:
    """(FLOP, byte) fractions of the fitted rates (peak x mfu, bandwidth x mbu) the busiest
    rank's grouped expert GEMM reaches at `tokens_per_expert` rows per touched expert copy
    (kernel_seconds): a few tokens per expert stream weights for few FLOPs, far from the FLOP
    peak; at the ridge both fractions are 2^(-1/p)."""
    if tokens_per_expert <= 0:
        return 0.0, 0.0
    g, e, w = inst.gpu, inst.efficiency, inst.weights
    flop_s = 2.0 * tokens_per_expert * imbalance / (g.peak_flops(inst.expert_dtype) * e.mfu)
    byte_s = w["expert_bytes"] / inst.params.expert_params / (g.memory.hbm_tbps * 1e12 * e.mbu)
    t = float(kernel_seconds(flop_s, byte_s))
    return flop_s / t, byte_s / t


def kernel_seconds(c, m):
    """A GEMM's seconds from its FLOP seconds c and byte seconds m (floats or arrays):
    (c^p + m^p)^(1/p), the roofline max(c, m) with its corner rounded (moe-serving.yaml
    gemm_roofline). Written as big x (1 + (small / big)^p)^(1/p) so that it neither overflows
    nor divides by zero."""
    p = serving().gemm_roofline.sharpness
    if type(c) is float and type(m) is float:  # one GEMM: the same IEEE operations, no arrays
        big, small = (c, m) if c >= m else (m, c)
        ratio = small / big if big > 0 else 0.0
        return big * (1.0 + ratio**p) ** (1.0 / p)
    big, small = np.maximum(c, m), np.minimum(c, m)
    ratio = np.divide(small, big, out=np.zeros_like(big, dtype=float), where=big > 0)
    return big * (1.0 + ratio**p) ** (1.0 / p)


def deepep_fixed_seconds(inst, phase: str) -> float:
    """Fixed seconds of one pass's dispatch and combine calls (two per MoE layer): the
    low-latency kernels in decode, the normal ones in prefill; internode when the EP group
    spans more than one NVLink domain."""
    if inst.model.ffn.moe is None or inst.ep <= 1 or inst.dp <= 1:
        return 0.0  # no all-to-all without DP attention (comm.a2a_bytes)
    lat = serving().deepep_latency
    across = inst.ep > inst.gpu.interconnect.domain_gpus
    if phase == "prefill":
        us = lat.normal_internode_us if across else lat.normal_intranode_us
    else:
        us = lat.low_latency_internode_us if across else lat.low_latency_intranode_us
    return 2.0 * inst.params.moe_layers * us * 1e-6 * inst.gpu.efficiency.fixed_time_scale


def step_cpu_seconds(inst, requests: float) -> float:
    """The engine's per-pass CPU cost that grows with the pass's requests, per DP rank (each
    attention-DP rank schedules its share in parallel)."""
    if requests <= 0:
        return 0.0
    scale = inst.gpu.efficiency.fixed_time_scale
    return serving().engine_step.per_request_us * 1e-6 * requests / inst.dp * scale


def kernels_per_pass(inst) -> float:
    """Kernels one forward pass of `inst` launches (perf/fixed_cost.py counts them)."""
    return fixed_cost.kernels_per_pass(inst)


def kernel_floor_seconds(inst) -> float:
    """The kernels' fixed time of one pass (moe-serving.yaml kernel_floor): roofline.py adds it
    to the kernels' roofline time (an alpha-beta model, fixed_cost.py)."""
    return inst.fixed.kernels_s


def allreduce_fixed_seconds(inst) -> float:
    """Latency floors of one pass's TP all-reduce and DP-attention gather calls, on top of
    their bytes (fixed_cost.py)."""
    return inst.fixed.collectives_s


def attention_fractions(model) -> tuple[float, float] | None:
    """(compute, memory) fractions of peak of the model's attention kernels, when they are
    measured ones (latent attention), else None (the GPU's fitted mfu and mbu apply)."""
    k = serving().attention_kernels
    if model.attention.kind not in k.kinds:
        return None
    return k.compute_fraction, k.memory_fraction


def breakdown(inst, tokens: float, requests: float, phase: str) -> dict[str, float | None]:
    """The value of each term for one pass of `tokens` tokens and `requests` requests."""
    moe = inst.model.ffn.moe
    fixed = inst.fixed
    out: dict[str, float | None] = {
        "step_cpu_s": step_cpu_seconds(inst, requests),
        "kernel_floor_s": fixed.kernels_s,
        "allreduce_fixed_s": fixed.collectives_s,
        **{f"fixed_{k}": v for k, v in fixed.as_dict().items()},
        "attention_compute_fraction": None,
        "attention_memory_fraction": None,
    }
    fr = attention_fractions(inst.model)
    if fr is not None:
        out["attention_compute_fraction"], out["attention_memory_fraction"] = fr
    if moe is None:
        return out
    touched = expected_experts_touched(tokens, inst.expert_slots, moe.experts_per_token)
    m = tokens * moe.experts_per_token / touched if touched > 0 else 0.0
    fractions = grouped_gemm_fractions(inst, m, expert_imbalance(inst, tokens))
    out.update(
        {
            "tokens_per_expert": m,
            "grouped_gemm_efficiency": fractions[0],
            "grouped_gemm_bandwidth_fraction": fractions[1],
            "expert_imbalance": expert_imbalance(inst, tokens),
            "deepep_fixed_s": deepep_fixed_seconds(inst, phase),
        }
    )
    return out
