"""An instance (GPU type x GPUs x parallelism) and its memory: weights per GPU, KV capacity."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema.engine import EngineLimits
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.perf import engine_limits, fixed_cost, layers
from pdd_plan.perf.comm import serving


@dataclass(frozen=True)
class Instance:
    model: ModelProfile
    gpu: GPUProfile
    n_gpus: int
    tp: int  # tensor parallel degree of attention and dense layers
    ep: int  # expert parallel degree (1 for dense models)
    dp: int = 1  # attention data-parallel groups (SGLang --dp-size); attention TP = tp / dp
    dtype: str | None = None  # overrides the checkpoint's linear-layer dtype
    # extra physical expert slots (SGLang --ep-num-redundant-experts): EPLB copies hot experts
    redundant_experts: int = 0
    # two micro-batches overlapping all-to-all and compute; None: the engine default
    two_batch_overlap: bool | None = None
    # one batch, combine hidden under the down GEMM and shared experts (SGLang
    # --enable-single-batch-overlap); excludes two-batch overlap
    single_batch_overlap: bool = False
    # busiest EP rank's MoE load over the mean; None: moe-serving.yaml's figure (EPLB or not)
    expert_load: float | None = None
    # the engine's configured running-request limit (a scenario's, `perf --batch`); None: the
    # deployed engine's defaults (engine_limits.py: running requests, CUDA-graph batch)
    max_running: int | None = None
    # the scenario's `engine:` limits, each replacing the engine's default (engine_limits.py)
    limits: EngineLimits | None = None

    def __post_init__(self) -> None:
        m, n = self.model, self.n_gpus
        where = f"{m.name} on {n}x{self.gpu.name}"
        if n < 1 or self.tp < 1 or self.ep < 1:
            raise InputError(
                None, "parallelism", f"{where}: sizes must be >= 1", "use positive sizes"
            )
        if self.tp != n:
            raise InputError(
                None,
                "tp",
                f"{where}: tp={self.tp} must equal the GPU count {n} (an instance is one TP "
                "group, as SGLang's --tp-size)",
                "set --tp to --gpus; use --dp-attention for data-parallel attention, or run "
                "several instances",
            )
        if self.ep > n or n % self.ep:
            raise InputError(
                None,
                "ep",
                f"{where}: ep={self.ep} does not divide {n} GPUs",
                "pick ep dividing the GPU count",
            )
        if m.ffn.moe is None and self.ep != 1:
            raise InputError(None, "ep", f"{m.name} is dense: ep must be 1", "drop --ep")
        self._check_experts(where)
        if self.dp < 1 or self.tp % self.dp:
            raise InputError(
                None,
                "dp",
                f"{where}: dp={self.dp} does not divide tp={self.tp}",
                "pick dp dividing tp",
            )
        if self.dtype is not None and self.dtype not in layers.DTYPE_BYTES:
            raise InputError(
                None,
                "dtype",
                f"unknown weight dtype '{self.dtype}'",
                f"use one of {', '.join(layers.DTYPE_BYTES)}",
            )
        heads = m.attention.num_heads
        if heads % self.attn_tp:
            raise InputError(
                None,
                "tp",
                f"{where}: attention TP {self.attn_tp} does not divide {heads} heads",
                "pick tp (or tp/dp) dividing the head count",
            )

    def _check_experts(self, where: str) -> None:
        moe = self.model.ffn.moe
        if self.redundant_experts < 0:
            raise InputError(None, "redundant_experts", "must be >= 0", "give a count >= 0")
        if moe is None:
            if self.redundant_experts:
                raise InputError(
                    None, "redundant_experts", f"{self.model.name} is dense", "drop it"
                )
            return
        slots = moe.num_experts + self.redundant_experts
        if slots % self.ep:
            extra = f" + {self.redundant_experts} redundant" if self.redundant_experts else ""
            raise InputError(
                None,
                "ep",
                f"{where}: ep={self.ep} does not divide {moe.num_experts}{extra} experts",
                "pick ep dividing the expert slots, or add redundant experts (EPLB) so that "
                "it does",
            )
        if self.expert_load is not None and self.expert_load < 1:
            raise InputError(None, "expert_load", "must be >= 1 (max over mean)", "e.g. 1.0")

    @property
    def expert_slots(self) -> int:
        """Physical routed-expert copies per MoE layer (logical experts + redundant ones)."""
        moe = self.model.ffn.moe
        return 0 if moe is None else moe.num_experts + self.redundant_experts

    @property
    def expert_imbalance(self) -> float:
        """Busiest EP rank's tokens over the mean (1 without EP); with EPLB when redundant
        experts are configured (data/profiles/runtime/moe-serving.yaml)."""
        if self.expert_load is not None:
            return float(self.expert_load)
        if self.model.ffn.moe is None or self.ep <= 1:
            return 1.0

        load = serving().expert_load
        return load.imbalance_with_eplb if self.redundant_experts else load.imbalance_without_eplb

    @property
    def tbo(self) -> bool:
        """Whether passes run as two overlapped micro-batches (default: EP with DP attention,
        SGLang's large-EP recipe)."""
        if self.single_batch_overlap:
            return False
        if self.two_batch_overlap is not None:
            return bool(self.two_batch_overlap) and self.ep > 1

        default = serving().two_batch_overlap.default_with_dp_attention
        return default and self.ep > 1 and self.dp_attention

    @property
    def dp_attention(self) -> bool:
        return self.dp > 1

    @property
    def attn_tp(self) -> int:
        """Tensor-parallel degree inside one attention group."""
        return self.tp // self.dp

    @property
    def label(self) -> str:
        dp = f" dp{self.dp}" if self.dp_attention else ""
        red = f"+{self.redundant_experts}" if self.redundant_experts else ""
        return f"{self.n_gpus}x{self.gpu.name} tp{self.tp}{dp} ep{self.ep}{red}"

    @property
    def compute_dtype(self) -> str:
        return self.dtype or self.model.weights.dtype

    @property
    def expert_dtype(self) -> str:
        """The routed experts' weight dtype (their grouped GEMMs run on its tensor cores)."""
        return self.dtype or self.model.weights.expert_dtype or self.model.weights.dtype

    @cached_property
    def value_key(self) -> tuple:
        """Everything the perf model reads from this instance, by value and hashable: the key
        of memoized timings, so equal instances of separate scenario loads (sweep points, the
        report's regime cells) share them. Profiles by the repr of their dumped fields (floats
        exactly)."""
        rest = tuple(
            getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("model", "gpu")
        )
        return (repr(self.model.model_dump()), repr(self.gpu.model_dump()), rest)

    @cached_property
    def params(self) -> layers.ParamCounts:
        return layers.param_counts(self.model)

    @cached_property
    def fixed(self) -> fixed_cost.FixedCost:
        """The fixed seconds of one pass (perf/fixed_cost.py): every pass of a prediction asks."""
        return fixed_cost.fixed_cost(self)

    @cached_property
    def weights(self) -> dict[str, float]:
        return layers.weight_bytes(self.model, self.dtype)

    @cached_property
    def weight_bytes_per_gpu(self) -> float:
        """Per-GPU weight shard: attention by attention-TP (replicated across DP-attention groups),
        other dense layers by TP, routed experts over all GPUs (EP ranks x expert-TP = tp),
        redundant expert copies included."""
        w, p = self.weights, self.params
        attn = p.attention * layers.DTYPE_BYTES[self.compute_dtype]
        rest_dense = w["dense"] - attn
        experts = w["experts"]
        if self.redundant_experts:
            experts *= self.expert_slots / self.model.ffn.moe.num_experts  # type: ignore[union-attr]
        return attn / self.attn_tp + rest_dense / self.tp + experts / self.tp

    @cached_property
    def kv_replication(self) -> float:
        """How many copies of each token's KV the instance stores."""
        a, t = self.model.attention, self.attn_tp
        if a.kind == "gqa":
            return t / min(t, a.num_kv_heads)  # type: ignore[operator, type-var]
        return float(t)  # one latent / one KV head: every rank of an attention group keeps it whole

    def kv_pool_bytes_with(
        self, mem_fraction: float | None = None, free_fraction: float | None = None
    ) -> float:
        """Unique KV bytes the instance holds when the engine gives KV either
        `hbm * mem_fraction - weights` per GPU (SGLang --mem-fraction-static; default: the GPU
        profile's) or `free_fraction * (hbm - weights)` (TensorRT-LLM kv_cache_free_gpu_mem_fraction)."""
        hbm = self.gpu.memory.hbm_gb * 1e9
        if free_fraction is not None:
            per_gpu = free_fraction * (hbm - self.weight_bytes_per_gpu)
        else:
            frac = self.gpu.efficiency.mem_fraction if mem_fraction is None else mem_fraction
            per_gpu = hbm * frac - self.weight_bytes_per_gpu
        return max(per_gpu, 0.0) * self.n_gpus / self.kv_replication

    @cached_property
    def kv_pool_bytes(self) -> float:
        """Unique KV bytes the instance can hold (after weights, under mem_fraction)."""
        return self.kv_pool_bytes_with()

    @property
    def family(self) -> str:
        """dense | moe: the model family whose efficiency factors the passes run with."""
        return "dense" if self.model.ffn.moe is None else "moe"

    @cached_property
    def efficiency(self):
        """The GPU's efficiency factors for this model's family (inputs/schema/gpu.py)."""
        return self.gpu.efficiency.for_family(self.family)

    @property
    def mode(self) -> str:
        """'analytic' or 'calibrated': where this GPU's efficiency factors come from."""
        return self.gpu.efficiency.mode

    @property
    def fits(self) -> bool:
        return self.kv_pool_bytes > 0

    def require_fit(self) -> None:
        if not self.fits:
            need = self.weight_bytes_per_gpu / 1e9
            have = self.gpu.memory.hbm_gb * self.gpu.efficiency.mem_fraction
            raise InputError(
                None,
                "--gpus",
                f"{self.model.name} does not fit on {self.label}: {need:.1f} GB of weights per GPU, "
                f"{have:.1f} GB usable",
                "use more GPUs per instance, a larger-memory GPU or a smaller --dtype",
            )

    @cached_property
    def kv_capacity_tokens(self) -> float:
        return self.kv_pool_bytes / layers.kv_bytes_per_token(self.model)

    def kv_max_batch(self, context_tokens: float) -> int:
        """Requests of this (live) context the KV pool holds at once, in whole pages."""
        page = engine_limits.defaults().page_tokens
        per = float(layers.kv_bytes(self.model, engine_limits.pages(context_tokens, page)))
        return int(np.floor(self.kv_pool_bytes / per)) if per > 0 else 0

    def max_batch(self, context_tokens: float) -> int:
        """Requests of this live context the instance runs at once: the KV pool's capacity and
        the engine's caps (engine_limits.py), the smallest."""
        caps = engine_limits.engine_caps(self)
        return int(min([self.kv_max_batch(context_tokens), *caps.values()]))

    @property
    def cost_per_hour(self) -> float:
        return self.n_gpus * self.gpu.price.usd_per_gpu_hour


def gpu_perf_key(gpu: GPUProfile) -> tuple:
    """What the perf model reads of a GPU, as a hashable value (not its price, which only
    costs): the key of caches that outlive one scenario, since a price override copies the
    profile (a regime map's every cell builds equal GPUs anew)."""
    return (gpu.name, gpu.compute, gpu.memory, gpu.interconnect, gpu.efficiency)


def instance_key(inst: Instance) -> tuple:
    """An instance as a cache key: its model by identity (profiles are loaded once per file;
    a cache keeps the model alive so the id stays unique), its GPU by :func:`gpu_perf_key`,
    and every other field by value."""
    rest = tuple(
        getattr(inst, f.name) for f in dataclasses.fields(inst) if f.name not in ("model", "gpu")
    )
    return (id(inst.model), gpu_perf_key(inst.gpu), rest)


def parallelism_candidates(
    model: ModelProfile,
    gpu: GPUProfile,
    max_gpus: int = 32,
    extra_sizes: int = 1,
    dtype: str | None = None,
    limits: EngineLimits | None = None,
) -> list[Instance]:
    """The smallest power-of-two GPU counts that fit the model (and `extra_sizes` larger ones),
    each under the engine limits `limits` (None: the engine's defaults).

    MoE models run EP over all GPUs with the DP-attention split that leaves the most KV room
    (the SGLang large-scale recipe); dense models run TP within a node, one replica per instance.
    """
    out: list[Instance] = []
    n = 1
    while n <= max_gpus:
        inst = _default_parallelism(model, gpu, n, dtype, limits)
        if inst is not None and inst.fits:
            out.append(inst)
            if len(out) > extra_sizes:
                break
        n *= 2
    return out


def _default_parallelism(
    model: ModelProfile,
    gpu: GPUProfile,
    n: int,
    dtype: str | None = None,
    limits: EngineLimits | None = None,
) -> Instance | None:
    if model.ffn.moe is None:
        if n > gpu.interconnect.gpus_per_node:
            return None  # dense TP across nodes is not a serving recipe worth planning
        try:
            return Instance(model, gpu, n, tp=n, ep=1, dtype=dtype, limits=limits)
        except InputError:
            return None
    ep = n if model.ffn.moe.num_experts % n == 0 else 1
    best: Instance | None = None
    dp = 1
    while dp <= n:
        try:
            inst = Instance(model, gpu, n, tp=n, ep=ep, dp=dp, dtype=dtype, limits=limits)
        except InputError:
            inst = None
        if inst is not None and (best is None or inst.kv_pool_bytes > best.kv_pool_bytes):
            best = inst
        dp *= 2
    return best


# objects an instance holds by reference, keyed by identity (pydantic models are not hashable;
# the memos' entries keep them alive, so an id stays theirs)
_BY_ID = ("model", "gpu", "limits")
_FIELDS = tuple(f.name for f in dataclasses.fields(Instance))


def shape_key(inst: Instance) -> tuple:
    """What the perf model reads from `inst`, cheap and hashable: its profiles by identity,
    every other field by value. Equal keys, equal timings: the uncertainty draws build a fresh
    instance for every fleet they check, on the same (memoized) profiles of the draw, so an
    instance's identity misses where this key hits."""
    return tuple(id(getattr(inst, f)) if f in _BY_ID else getattr(inst, f) for f in _FIELDS)


def same_profiles(a: Instance, b: Instance) -> bool:
    """Whether `a` holds the very profiles `b` does (a `shape_key` hit is one only then)."""
    return all(getattr(a, f) is getattr(b, f) for f in _BY_ID)
