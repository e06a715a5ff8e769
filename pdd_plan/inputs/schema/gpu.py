"""GPU profile: peak rates, memory, interconnect, price and efficiency factors."""

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt

from pdd_plan.inputs.schema.common import MAX_USD_PER_GPU_HOUR, Name, Strict


class Compute(Strict):
    bf16_tflops: PositiveFloat  # dense tensor-core peak
    fp8_tflops: PositiveFloat | None = None  # None: no FP8 tensor cores (runs FP8 weights as BF16)
    fp4_tflops: PositiveFloat | None = None
    source: str


class Memory(Strict):
    hbm_gb: PositiveFloat  # GB (1e9 bytes)
    hbm_tbps: PositiveFloat  # TB/s (1e12 bytes/s)
    source: str


# Fixed cost of one KV transfer over RDMA inside a datacenter, for profiles that do not state
# it; the bundled profiles state it with its source (interconnect.source).
DEFAULT_RDMA_LATENCY_MS = 5.0


class Interconnect(Strict):
    scale_up_gbytes_bidir: PositiveFloat  # GB/s per GPU, both directions added (vendor figure)
    gpus_per_node: PositiveInt
    rdma_gbps_per_gpu: PositiveFloat  # Gb/s scale-out NIC per GPU
    rdma_latency_ms: PositiveFloat = DEFAULT_RDMA_LATENCY_MS  # per KV transfer, on top of bytes/bw
    # GPUs sharing one NVLink domain (GB200 NVL72: 72); default: one node
    scale_up_domain_gpus: PositiveInt | None = None
    source: str

    @property
    def domain_gpus(self) -> int:
        """GPUs reachable over NVLink (scale-up) rather than RDMA."""
        return self.scale_up_domain_gpus or self.gpus_per_node

    @property
    def rdma_latency_s(self) -> float:
        return self.rdma_latency_ms / 1e3


class Price(Strict):
    usd_per_gpu_hour: float = Field(gt=0, le=MAX_USD_PER_GPU_HOUR)
    source: str


class FamilyFactors(Strict):
    """The fitted factors of one model family where they differ from the profile's (dense)
    ones: MoE passes run grouped expert GEMMs and MLA kernels at another fraction of peak."""

    mfu: float = Field(gt=0, le=1)
    mbu: float = Field(gt=0, le=1)
    step_overhead_ms: float = Field(ge=0)
    # how they were estimated: from this GPU's rows of the family, or through the part of the
    # joint fit shared by every GPU (the GPU has no rows of the family)
    basis: str


class Efficiency(Strict):
    """Fractions of peak a real engine reaches; fitted by `pdd-plan calibrate`."""

    mfu: float = Field(gt=0, le=1)  # large-GEMM fraction of peak FLOP/s
    mbu: float = Field(gt=0, le=1)  # fraction of HBM bandwidth on weight/KV streaming
    step_overhead_ms: float = Field(ge=0)  # per forward pass: launch, scheduling, sampling
    comm_efficiency: float = Field(gt=0, le=1)  # fraction of scale-up / RDMA bandwidth achieved
    mem_fraction: float = Field(gt=0, lt=1)  # --mem-fraction-static: weights + KV pool share of HBM
    mode: Literal["analytic", "calibrated"] = "analytic"
    source: str
    moe: FamilyFactors | None = None  # MoE models' factors (None: the same as dense)
    # times the runtime profile's fixed costs (DeepEP's per-call latency, the engine's CPU per
    # request: perf/moe_terms.py); a deployment's speed_factor k sets 1/k (evaluate/fleet.py)
    fixed_time_scale: float = Field(default=1.0, gt=0)

    def for_family(self, family: str) -> "Efficiency":
        """The factors a model of `family` (dense | moe) runs with on this GPU."""
        if family != "moe" or self.moe is None:
            return self
        f = self.moe
        return self.model_copy(
            update={
                "mfu": f.mfu,
                "mbu": f.mbu,
                "step_overhead_ms": f.step_overhead_ms,
            }
        )

    def basis(self, family: str) -> str:
        """Where the factors of `family` come from, in words."""
        if family == "moe" and self.moe is not None:
            return self.moe.basis
        if self.mode == "analytic":
            return f"analytic defaults of the GPU profile (no calibration file): {self.source}"
        return self.source.split("; ")[0]  # a calibration file's source leads with its basis


class GPUProfile(Strict):
    name: Name
    display_name: Name
    compute: Compute
    memory: Memory
    interconnect: Interconnect
    price: Price
    efficiency: Efficiency

    def peak_flops(self, dtype: str) -> float:
        """FLOP/s for GEMMs whose operands are `dtype`; falls back to the next wider type."""
        c = self.compute
        if dtype == "fp4" and c.fp4_tflops:
            return c.fp4_tflops * 1e12
        if dtype in ("fp4", "fp8") and c.fp8_tflops:
            return c.fp8_tflops * 1e12
        return c.bf16_tflops * 1e12
