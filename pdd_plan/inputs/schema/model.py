"""Model profile: the architecture facts from which KV bytes, FLOPs and weights are computed."""

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from pdd_plan.inputs.schema.common import Name, Strict

Dtype = Literal["bf16", "fp8", "fp4"]


class Attention(Strict):
    """One block covers GQA/MHA, MLA, DSA (MLA + lightning indexer) and DeepSeek-V4 compressed."""

    kind: Literal["gqa", "mla", "dsa", "compressed"]
    num_heads: PositiveInt
    num_kv_heads: PositiveInt | None = None  # gqa, compressed (MQA: 1)
    head_dim: PositiveInt | None = None  # gqa, compressed
    q_lora_rank: PositiveInt | None = None
    kv_lora_rank: PositiveInt | None = None  # mla, dsa
    qk_nope_head_dim: PositiveInt | None = None  # mla, dsa
    qk_rope_head_dim: PositiveInt | None = None  # mla, dsa, compressed
    v_head_dim: PositiveInt | None = None  # mla, dsa
    o_groups: PositiveInt | None = None  # compressed: grouped low-rank output projection
    o_lora_rank: PositiveInt | None = None
    index_n_heads: PositiveInt | None = None  # dsa, compressed
    index_head_dim: PositiveInt | None = None
    index_topk: PositiveInt | None = None
    # compressed: per layer 0 (window only), csa_compress_ratio (CSA) or hca_compress_ratio (HCA)
    compress_ratios: list[int] | None = None
    # compressed: tokens per compressed KV row in CSA layers (sparse: the indexer picks
    # index_topk rows) and in HCA layers (dense). Defaults: DeepSeek-V4's (hardware.md §4.1).
    csa_compress_ratio: PositiveInt = 4
    hca_compress_ratio: PositiveInt = 128
    sliding_window: PositiveInt | None = None  # compressed: uncompressed recent tokens per layer
    source: str

    @model_validator(mode="after")
    def _needed_fields(self) -> "Attention":
        need = {
            "gqa": ["num_kv_heads", "head_dim"],
            "mla": ["kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"],
            "dsa": [
                "kv_lora_rank",
                "qk_nope_head_dim",
                "qk_rope_head_dim",
                "v_head_dim",
                "index_n_heads",
                "index_head_dim",
                "index_topk",
            ],
            "compressed": [
                "num_kv_heads",
                "head_dim",
                "qk_rope_head_dim",
                "index_n_heads",
                "index_head_dim",
                "index_topk",
                "compress_ratios",
                "sliding_window",
            ],
        }[self.kind]
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"attention kind '{self.kind}' needs {', '.join(missing)}")
        self._check_heads()
        csa, hca = self.csa_compress_ratio, self.hca_compress_ratio
        if csa == hca:
            raise ValueError("csa_compress_ratio and hca_compress_ratio must differ")
        if self.compress_ratios is not None and any(
            r not in (0, csa, hca) for r in self.compress_ratios
        ):
            raise ValueError(f"compress_ratios entries must be 0, {csa} or {hca}")
        return self

    def _check_heads(self) -> None:
        """Query heads share KV heads in whole groups: more KV heads than query heads, or a
        count that does not divide them, is no model (the KV bytes would be wrong)."""
        kv = self.num_kv_heads
        if kv is None:
            return
        if kv > self.num_heads:
            raise ValueError(f"num_kv_heads {kv} is above num_heads {self.num_heads}")
        if self.kind == "gqa" and self.num_heads % kv:
            raise ValueError(
                f"num_heads {self.num_heads} is not a multiple of num_kv_heads {kv} "
                "(each KV head serves a whole group of query heads)"
            )


class MoE(Strict):
    num_experts: PositiveInt
    num_shared_experts: int = Field(ge=0)
    experts_per_token: PositiveInt
    moe_intermediate_size: PositiveInt

    @model_validator(mode="after")
    def _routing(self) -> "MoE":
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"experts_per_token {self.experts_per_token} is above num_experts "
                f"{self.num_experts}"
            )
        return self


class FFN(Strict):
    intermediate_size: PositiveInt | None = None  # dense layers' FFN width
    # gated FFN (SwiGLU: gate, up, down = 3 matrices) or plain (GELU: up, down = 2; GPT-J)
    gated: bool = True
    first_dense_layers: int = Field(default=0, ge=0)  # MoE models: leading dense layers
    moe: MoE | None = None
    source: str

    @model_validator(mode="after")
    def _dense_width(self) -> "FFN":
        if self.moe is None and self.intermediate_size is None:
            raise ValueError("a dense model needs ffn.intermediate_size")
        if self.first_dense_layers and self.intermediate_size is None:
            raise ValueError("first_dense_layers > 0 needs ffn.intermediate_size")
        return self


class Weights(Strict):
    dtype: Dtype  # checkpoint dtype of the linear layers
    expert_dtype: Dtype | None = None  # routed experts, when different (DeepSeek-V4: fp4)
    embedding_dtype: Dtype = "bf16"
    source: str


# a per-request state above this is no model: no GPU instance holds a terabyte per request
MAX_REQUEST_STATE_BYTES = 1e12


class KVCache(Strict):
    dtype: Literal["bf16", "fp8"]
    # bytes a request holds independent of its length beyond what the attention layout gives
    # (perf/layers.py counts DeepSeek-V4's sliding window itself): it crosses the line with the
    # request's KV and sits in decode memory with it (a compressor's not-yet-compressed tail)
    per_request_state_bytes: float = Field(default=0.0, ge=0, le=MAX_REQUEST_STATE_BYTES)
    source: str


class Published(Strict):
    """Vendor's own totals, kept only to check the computed ones against."""

    total_params_b: float | None = None
    active_params_b: float | None = None
    kv_bytes_per_token: float | None = None
    source: str


class ModelProfile(Strict):
    name: Name
    display_name: Name
    hf_id: str | None = None
    num_layers: PositiveInt
    hidden_size: PositiveInt
    vocab_size: PositiveInt
    tie_word_embeddings: bool = False
    attention: Attention
    ffn: FFN
    weights: Weights
    kv_cache: KVCache
    page_size: PositiveInt = 1  # KV page granularity the serving engine requires
    published: Published | None = None
    source: str

    @model_validator(mode="after")
    def _layers(self) -> "ModelProfile":
        r = self.attention.compress_ratios
        if r is not None and len(r) < self.num_layers:
            raise ValueError(
                f"attention.compress_ratios has {len(r)} entries, needs num_layers={self.num_layers}"
            )
        if self.ffn.first_dense_layers > self.num_layers:
            raise ValueError("ffn.first_dense_layers exceeds num_layers")
        return self
