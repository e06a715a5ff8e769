"""Communication of one forward pass, from the link that carries it, and how much of it hides.

Expert all-to-all (DeepEP dispatch + combine), per MoE layer and GPU, with t = tokens per GPU,
k experts per token, h hidden size, ep EP ranks, D = min(ep, GPUs per NVLink domain) ranks in
one's own scale-up domain and n = ep / D domains (nodes):

    normal kernels (prefill):  NVLink copies = k (D - 1) / ep + k (ep - D) / ep     (local + forwarded)
                               RDMA copies   = (n - 1) (1 - (1 - 1/n)^k)            (once per remote node)
    low-latency (decode):      NVLink copies = k (D - 1) / ep,  RDMA copies = k (ep - D) / ep
    bytes(copies) = t * copies * h * (dispatch bytes + combine bytes)   FP8 dispatch (1 B), BF16 combine (2 B)
    seconds = imbalance * max(NVLink bytes / NVLink bw, RDMA bytes / RDMA bw)   (the two links run at once)

with each link's bandwidth the one-way peak times DeepEP's achieved fraction
(data/profiles/runtime/moe-serving.yaml). The RDMA copies of the normal kernels assume uniform
routing over the nodes (DeepSeek-V3's group-limited routing caps a token at 4 nodes, which only
binds beyond 4 nodes; not modeled). Each dispatch and combine call also pays a fixed latency
(moe-serving.yaml deepep_latency; added by roofline.py through moe_terms.py), which dominates
a small-batch decode step across nodes.

Two-batch overlap (SGLang --enable-two-batch-overlap, vLLM DBO) runs the batch as two
micro-batches; each dispatch and combine of one hides behind the compute the engine's stage
schedule runs beside it (overlap.py, schedule in moe-serving.yaml), with s the share of SMs the
communication kernels take from the compute while they run. The TP all-reduces are not
overlapped.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field

from pdd_plan.inputs.profiles import data_dir
from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.io import load


class DeepEP(Strict):
    normal_nvlink_fraction: float = Field(gt=0, le=1.2)
    normal_rdma_fraction: float = Field(gt=0, le=1.2)
    low_latency_nvlink_fraction: float = Field(gt=0, le=1.2)
    low_latency_rdma_fraction: float = Field(gt=0, le=1.2)
    normal_sm_fraction: float = Field(ge=0, lt=1)
    low_latency_sm_fraction: float = Field(ge=0, lt=1)
    source: str


Cover = Literal[
    "attention_prep",
    "attention_core",
    "attention",
    "shared_experts",
    "routed_experts",
    "routed_down",
]


class Hide(Strict):
    """One all-to-all of one micro-batch and MoE layer, and the compute it runs under."""

    comm: Literal["dispatch", "combine"]
    cover: list[Cover]


class TwoBatchOverlap(Strict):
    default_with_dp_attention: bool
    source: str
    decode: list[Hide]
    prefill: list[Hide]
    stages_source: str


class SingleBatchOverlap(Strict):
    cover_combine: list[Cover]
    source: str


class ExpertLoad(Strict):
    imbalance_without_eplb: float = Field(ge=1)
    imbalance_with_eplb: float = Field(ge=1)
    source: str


class GemmRoofline(Strict):
    """How sharp a GEMM's roofline corner is: its time is (c^p + m^p)^(1/p) from its FLOP time
    c and byte time m, p = `sharpness` (infinite: max(c, m))."""

    sharpness: float = Field(ge=1, le=64)
    source: str


class DeepEPLatency(Strict):
    """Fixed seconds of one dispatch or combine call, on top of its bytes / bandwidth."""

    normal_intranode_us: float = Field(ge=0)
    normal_internode_us: float = Field(ge=0)
    low_latency_intranode_us: float = Field(ge=0)
    low_latency_internode_us: float = Field(ge=0)
    source: str


class EngineStep(Strict):
    """The serving engine's CPU work per forward pass that grows with the requests in it
    (scheduling, sampling, output processing), per attention-DP rank."""

    per_request_us: float = Field(ge=0)
    source: str


class AttentionKernels(Strict):
    """Achieved fractions of peak of the attention kernels of the listed kinds."""

    kinds: list[Literal["mla", "dsa", "compressed", "gqa"]]
    compute_fraction: float = Field(gt=0, le=1)
    memory_fraction: float = Field(gt=0, le=1)
    source: str


class QuantKernels(Strict):
    """Activation-quantization kernels per layer where the GEMMs' weights are FP8 or FP4 (one
    before each quantized GEMM input an engine does not fuse into the kernel before it)."""

    attention_gqa: int = Field(ge=0)
    attention_latent: int = Field(ge=0)
    ffn_dense: int = Field(ge=0)
    ffn_moe: int = Field(ge=0)
    shared_experts: int = Field(ge=0)


class KernelFloor(Strict):
    """The fixed GPU time of a pass's kernels that no FLOP or byte count sees: each kernel
    takes `per_kernel_us` on top of its work, each collective call `allreduce_us` inside one
    NVLink domain (`allreduce_internode_us` across nodes) on top of its bytes."""

    per_kernel_us: float = Field(ge=0)
    allreduce_us: float = Field(ge=0)
    allreduce_internode_us: float = Field(ge=0)
    quant: QuantKernels
    attention_gqa: int = Field(ge=0)  # kernels per layer of GQA attention
    attention_latent: int = Field(ge=0)  # of latent attention (MLA, DSA, compressed)
    ffn_dense: int = Field(ge=0)  # of a dense FFN
    ffn_moe: int = Field(ge=0)  # of a routed-expert FFN (router to combine)
    shared_experts: int = Field(ge=0)  # added to a MoE FFN with shared experts
    per_pass: int = Field(ge=0)  # once per pass: embedding, final norm, LM head, sampling
    source: str


class MoEServing(Strict):
    name: str
    deepep: DeepEP
    two_batch_overlap: TwoBatchOverlap
    single_batch_overlap: SingleBatchOverlap
    expert_load: ExpertLoad
    gemm_roofline: GemmRoofline
    deepep_latency: DeepEPLatency
    engine_step: EngineStep
    attention_kernels: AttentionKernels
    kernel_floor: KernelFloor


@lru_cache(maxsize=1)
def serving() -> MoEServing:
    """The bundled engine constants (data/profiles/runtime/moe-serving.yaml)."""

    return load(MoEServing, str(data_dir() / "profiles" / "runtime" / "moe-serving.yaml"))


def _expected_remote_nodes(nodes: int, k: int) -> float:
    """Remote nodes a token routed to k uniformly drawn experts reaches (once each)."""
    if nodes <= 1:
        return 0.0
    return (nodes - 1) * (1.0 - (1.0 - 1.0 / nodes) ** k)


def a2a_copies(ep: int, domain: int, k: int, phase: str) -> tuple[float, float]:
    """(NVLink, RDMA) hidden-state copies per token and MoE layer that leave/enter one GPU."""
    d = max(1, min(ep, domain))
    nodes = -(-ep // d)
    if phase == "prefill":  # normal kernels: RDMA once per node, then NVLink forwarding
        nvl = k * (d - 1) / ep + k * (ep - d) / ep
        return nvl, _expected_remote_nodes(nodes, k)
    return k * (d - 1) / ep, k * (ep - d) / ep


def a2a_bytes(inst, tokens: float, phase: str) -> tuple[float, float]:
    """(NVLink, RDMA) bytes of one pass's dispatch + combine, per GPU, all MoE layers. None
    without DP attention: every rank then holds every token (TP attention), runs its own
    experts on them and the MoE's TP all-reduce combines the ranks' outputs (SGLang's and
    TensorRT-LLM's EP MoE without attention DP), so there is no all-to-all."""
    m = inst.model
    if m.ffn.moe is None or inst.ep <= 1 or inst.dp <= 1:
        return 0.0, 0.0
    per_gpu = tokens / inst.n_gpus
    # FP8 dispatch needs FP8 GEMMs; combine in BF16
    elem = m.hidden_size * 2.0 / (1.0 - dispatch_share(inst))
    nvl, rdma = a2a_copies(
        inst.ep, inst.gpu.interconnect.domain_gpus, m.ffn.moe.experts_per_token, phase
    )
    layers = inst.params.moe_layers
    return layers * per_gpu * nvl * elem, layers * per_gpu * rdma * elem


def dispatch_share(inst) -> float:
    """Dispatch's share of the all-to-all bytes (FP8 or BF16 dispatch, BF16 combine)."""
    d = 1.0 if inst.compute_dtype in ("fp8", "fp4") else 2.0
    return d / (d + 2.0)


def a2a_seconds(inst, tokens: float, phase: str, imbalance: float | None = None) -> float:
    """Seconds of one pass's expert all-to-all on the busiest GPU (see module docstring);
    `imbalance`: the busiest rank's load over the mean (default: the instance's systematic
    one; roofline.py passes moe_terms.expert_imbalance at the pass's tokens)."""
    nvl_b, rdma_b = a2a_bytes(inst, tokens, phase)
    if nvl_b == 0.0 and rdma_b == 0.0:
        return 0.0
    nvl_bw, rdma_bw = a2a_bandwidths(inst, phase)
    imbalance = inst.expert_imbalance if imbalance is None else imbalance
    return imbalance * max(nvl_b / nvl_bw, rdma_b / rdma_bw)


def a2a_bandwidths(inst, phase: str) -> tuple[float, float]:
    """(NVLink, RDMA) bytes per second one GPU's all-to-all kernels reach in this phase."""
    d, ic = serving().deepep, inst.gpu.interconnect
    low = phase != "prefill"
    nvl_bw = (
        ic.scale_up_gbytes_bidir
        / 2
        * 1e9
        * (d.low_latency_nvlink_fraction if low else d.normal_nvlink_fraction)
    )
    rdma_bw = (
        ic.rdma_gbps_per_gpu
        / 8
        * 1e9
        * (d.low_latency_rdma_fraction if low else d.normal_rdma_fraction)
    )
    return nvl_bw, rdma_bw


def allreduce_seconds(inst, tokens: float) -> float:
    """Two ring all-reduces per layer of the attention-TP group's tokens x h BF16 values."""
    tp = inst.attn_tp
    if tp <= 1:
        return 0.0
    m, g = inst.model, inst.gpu
    eff = g.efficiency.comm_efficiency
    nvlink = g.interconnect.scale_up_gbytes_bidir / 2 * 1e9 * eff  # one direction, bytes/s
    rdma = g.interconnect.rdma_gbps_per_gpu / 8 * 1e9 * eff
    per_gpu = 2 * m.num_layers * (tokens / inst.dp) * m.hidden_size * 2 * 2 * (tp - 1) / tp
    link = nvlink if tp <= g.interconnect.domain_gpus else min(nvlink, rdma)
    return per_gpu / link


def sm_fraction(phase: str) -> float:
    """Share of SMs the all-to-all kernels of this phase occupy while they run."""
    d = serving().deepep
    return d.normal_sm_fraction if phase == "prefill" else d.low_latency_sm_fraction
