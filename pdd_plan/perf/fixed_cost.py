"""A pass's fixed cost from its structure: what a step pays whatever its batch.

Per layer, the kernels it launches (attention, FFN or routed experts with their routing
kernels, shared experts, and one activation-quantization kernel per quantized GEMM input) and
the collectives it makes:

    TP all-reduce       2 per layer (after attention, after the FFN) in the attention-TP group
    DP-attention gather 2 per layer (all-gather before the FFN, reduce-scatter after it) where
                        attention is data parallel and no expert all-to-all replaces them
    EP dispatch/combine 2 per MoE layer (moe_terms.deepep_fixed_seconds)

per pass the embedding, final norm, LM head and sampling kernels. Each kernel costs
`per_kernel_us` on top of its FLOP or byte time and each collective call its latency floor on
top of its bytes (an alpha-beta model: the floor is what a kernel or call costs beyond its work,
which is what the sources measured; moe-serving.yaml kernel_floor). The engine's CPU work per
step (scheduling, sampling bookkeeping) is the fitted step overhead and its per-request part
(moe_terms.step_cpu_seconds), not here.

A batch-1 decode step is these terms plus the weights' bytes: the sum of what its layers must
do, not one fitted constant.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pdd_plan.perf.comm import serving

QUANTIZED = ("fp8", "fp4")  # weight dtypes whose GEMMs take quantized activations


@dataclass(frozen=True)
class FixedCost:
    """Seconds of one pass's fixed costs, by what pays them."""

    attention_kernels_s: float
    ffn_kernels_s: float
    routing_kernels_s: float  # router GEMM, top-k, token sort/align, weighted combine
    quant_kernels_s: float
    sampling_kernels_s: float  # embedding, final norm, LM head, sampler (once per pass)
    tp_allreduce_s: float
    dp_gather_s: float

    @property
    def kernels_s(self) -> float:
        """The kernels' floors together (added to the kernels' roofline time)."""
        return (
            self.attention_kernels_s
            + self.ffn_kernels_s
            + self.routing_kernels_s
            + self.quant_kernels_s
            + self.sampling_kernels_s
        )

    @property
    def collectives_s(self) -> float:
        """The collective calls' latency floors (added to their bytes / bandwidth)."""
        return self.tp_allreduce_s + self.dp_gather_s

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "kernels_s": self.kernels_s, "collectives_s": self.collectives_s}


ROUTING_KERNELS = 4  # of moe-serving.yaml's ffn_moe count: router GEMM, top-k, sort, combine


def _counts(inst) -> dict[str, float]:
    """Kernels per pass by kind (floats: layer counts times kernels per layer)."""
    k, m = serving().kernel_floor, inst.model
    moe = m.ffn.moe
    n_moe = 0 if moe is None else m.num_layers - m.ffn.first_dense_layers
    n_dense = m.num_layers - n_moe
    gqa = m.attention.kind == "gqa"
    shared = moe is not None and bool(moe.num_shared_experts)
    q = k.quant
    q_attn = (q.attention_gqa if gqa else q.attention_latent) * m.num_layers
    q_dense = q.ffn_dense * n_dense
    q_moe = (q.ffn_moe + (q.shared_experts if shared else 0)) * n_moe
    quant = (q_attn + q_dense) * (inst.compute_dtype in QUANTIZED)
    quant += q_moe * (inst.expert_dtype in QUANTIZED)
    return {
        "attention": (k.attention_gqa if gqa else k.attention_latent) * m.num_layers,
        "ffn": n_dense * k.ffn_dense
        + n_moe * (k.ffn_moe - ROUTING_KERNELS + (k.shared_experts if shared else 0)),
        "routing": n_moe * ROUTING_KERNELS,
        "quant": quant,
        "sampling": k.per_pass,
    }


def kernels_per_pass(inst) -> float:
    """Kernels one forward pass launches."""
    return float(sum(_counts(inst).values()))


def _calls(inst) -> tuple[int, int, int]:
    """Collective calls per pass: TP all-reduces and DP-attention gathers (2 per layer each),
    expert dispatches and combines (2 per MoE layer, only with DP attention:
    moe_terms.deepep_fixed_seconds, comm.a2a_bytes)."""
    m = inst.model
    a2a = m.ffn.moe is not None and inst.ep > 1  # with dp > 1: dispatch/combine instead
    allreduce = 2 * m.num_layers if inst.attn_tp > 1 else 0
    gather = 2 * m.num_layers if inst.dp > 1 and not a2a else 0
    dispatch = 2 * inst.params.moe_layers if a2a and inst.dp > 1 else 0
    return allreduce, gather, dispatch


def launches_per_pass(inst) -> float:
    """Launches one forward pass makes from the host, its kernels and its collective calls:
    what an eager pass pays its host launch cost on (perf/serve_step.py)."""
    return kernels_per_pass(inst) + sum(_calls(inst))


def call_latency_us(inst, group: int) -> float:
    """Latency floor of one small collective call among `group` GPUs: one-shot inside an NVLink
    domain, NCCL over the network across it."""
    k = serving().kernel_floor
    return (
        k.allreduce_us if group <= inst.gpu.interconnect.domain_gpus else k.allreduce_internode_us
    )


def fixed_cost(inst) -> FixedCost:
    """The fixed seconds of one pass of `inst` (scaled by the GPU's fixed_time_scale)."""
    k = serving().kernel_floor
    scale = 1e-6 * inst.gpu.efficiency.fixed_time_scale
    c = {name: n * k.per_kernel_us * scale for name, n in _counts(inst).items()}
    allreduce, gather, _ = _calls(inst)
    ar = allreduce * call_latency_us(inst, inst.attn_tp) * scale if allreduce else 0.0
    dp = gather * call_latency_us(inst, inst.tp) * scale if gather else 0.0
    return FixedCost(c["attention"], c["ffn"], c["routing"], c["quant"], c["sampling"], ar, dp)
