"""DeepSeek-V3's MoE shapes, the plan of the MoE kernel timings, and each timed piece's FLOPs and
bytes. Plain Python: `benchmarks/h200_moe.py` imports it on the GPU machine (torch, no pdd_plan)
and `benchmarks/h200_moe_rows.py` here (pdd_plan, no torch).

Shapes: reference/hf_configs DeepSeek-V3 config.json (hidden_size 7168, moe_intermediate_size
2048, n_routed_experts 256, num_experts_per_tok 8, n_shared_experts 1, num_attention_heads 128,
q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128);
pdd_plan/data/profiles/models/deepseek-v3.yaml carries the same.
"""

from __future__ import annotations

HIDDEN = 7168
MOE_INTER = 2048
EXPERTS = 256
TOP_K = 8
HEADS = 128
Q_LORA = 1536
KV_LORA = 512
ROPE = 64
NOPE = 128
V_HEAD = 128
LATENT = KV_LORA + ROPE  # one cached token of MLA: the latent and its rope key (576)
BYTES = {"bf16": 2, "fp8": 1}

# grouped GEMM: experts per GPU (EP 8 and EP 32 of 256), tokens per expert, the two dtypes
GG_EXPERTS = (32, 8)
GG_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
GG_DTYPES = ("bf16", "fp8")
# absorbed MLA decode attention: heads on the GPU (DP attention: all 128; TP 8: 16), batch,
# context; a batch's KV at most MLA_MAX_TOKENS tokens (what one GPU's cache holds in serving)
MLA_HEADS = (128, 16)
MLA_BATCH = (1, 4, 16, 64, 256)
MLA_CONTEXT = (2048, 4096, 8192, 16384, 32768, 65536, 131072)
MLA_MAX_TOKENS = 1 << 23
# one decoder layer at an EP shard (decode, DP attention): batch per GPU, context, EP size
LAYER_BATCH = (4, 32, 128, 256)
LAYER_CONTEXT = (4096, 32768)
LAYER_EP = (8, 32)
# CPU check of the code paths (--dry-run): tiny experts, heads and contexts
DRY = {
    "hidden": 64,
    "inter": 32,
    "gg_experts": (4,),
    "gg_tokens": (1, 8),
    "mla_heads": (4,),
    "mla_batch": (1, 2),
    "mla_context": (16, 64),
    "layer_batch": (4,),
    "layer_context": (16,),
    "layer_ep": (8,),
}


def grouped_gemm_flops(
    experts: int, tokens: int, hidden: int = HIDDEN, inter: int = MOE_INTER
) -> float:
    """The experts' gate/up GEMM (hidden -> 2 inter) and down GEMM (inter -> hidden)."""
    return 2.0 * experts * tokens * (hidden * 2 * inter + inter * hidden)


def grouped_gemm_bytes(
    experts: int, tokens: int, dtype: str, hidden: int = HIDDEN, inter: int = MOE_INTER
) -> float:
    """Weights and inputs in `dtype`, outputs in bf16, each read or written once."""
    b = BYTES[dtype]
    weights = experts * 3 * hidden * inter * b
    inputs = experts * tokens * (hidden + inter) * b
    outputs = experts * tokens * (2 * inter + hidden) * 2
    return float(weights + inputs + outputs)


def tokens_per_expert(batch: int, ep: int) -> float:
    """Balanced routing at EP size `ep`, `batch` tokens on each GPU: batch x TOP_K copies per
    GPU over EXPERTS / ep local experts."""
    return batch * TOP_K * ep / EXPERTS


def mla_flops(
    batch: int, heads: int, context: int, latent: int = LATENT, kv_lora: int = KV_LORA
) -> float:
    """Scores against the latent-and-rope key, then the latent values."""
    return 2.0 * batch * heads * context * (latent + kv_lora)


def mla_bytes(
    batch: int, heads: int, context: int, latent: int = LATENT, kv_lora: int = KV_LORA
) -> float:
    """The cached tokens read once (bf16), what a fused decode kernel reads, and the queries
    and outputs (bf16)."""
    return float(batch * context * latent * 2 + batch * heads * (latent + kv_lora) * 2)


def mla_plan(dry: bool = False) -> list[tuple[int, int, int]]:
    """(heads, batch, context) of the MLA timings, within MLA_MAX_TOKENS a batch."""
    if dry:
        return [
            (h, b, c)
            for h in DRY["mla_heads"]
            for b in DRY["mla_batch"]
            for c in DRY["mla_context"]
        ]
    return [
        (h, b, c)
        for h in MLA_HEADS
        for b in MLA_BATCH
        for c in MLA_CONTEXT
        if b * c <= MLA_MAX_TOKENS
    ]


def layer_plan(dry: bool = False) -> list[tuple[int, int, int]]:
    """(batch, context, ep) of the layer timings."""
    d = (
        DRY
        if dry
        else {"layer_batch": LAYER_BATCH, "layer_context": LAYER_CONTEXT, "layer_ep": LAYER_EP}
    )
    return [(b, c, e) for e in d["layer_ep"] for b in d["layer_batch"] for c in d["layer_context"]]
