"""Time real decoder-layer stacks of the profiled dense models on one GPU, random weights.

Run on the GPU machine (torch with CUDA; nothing of pdd_plan is imported, so it runs in the
machine's own python):

    python3 benchmarks/h200_layers.py --out DIR              # PLAN: ~70 s on one H200
    python3 benchmarks/h200_layers.py --out DIR --second     # Qwen3-32B, then PLAN again
    python3 benchmarks/h200_layers.py --out DIR --split-decode   # decode, split-KV attention
    python3 benchmarks/h200_layers.py --out DIR --extend [--extend-merge]  # cached prefixes
    python3 benchmarks/h200_layers.py --out DIR --dry-run    # CPU, tiny shapes: checks the code

The five calls of 2026-12-01 wrote benchmarks/data/h200_layers_2026-12-01_run{1..5}*.json
(in that order: plain, --second, --split-decode, --extend, --extend --extend-merge);
benchmarks/h200_kernel_rows.py turns them into calibration measurements.

What one measurement is: the kernels of ONE forward pass of the whole model (every decoder
layer, each with its own weights and its own KV cache, then the final norm and the LM head on
the tokens that need logits), with no serving engine around it: no scheduler, no sampling, no
communication (TP1). It is what pdd-plan's roofline calls the pass's kernel time
(perf/roofline.py: total minus step overhead). A layer is Llama's: RMSNorm, QKV GEMM, RoPE,
KV-cache write, attention (torch's scaled_dot_product_attention, flash or cuDNN backend, never
the math one), O GEMM, residual, RMSNorm, gate/up GEMM, SiLU*mul, down GEMM, residual.

- bf16 weights: torch.matmul (cuBLAS). fp8 weights: torch._scaled_mm with per-tensor scales
  (e4m3 weights and activations, bf16 out, rows padded to 16 as cuBLASLt requires), the
  activation cast to fp8 included; KV cache bf16 in both (SDPA has no fp8 KV).
- prefill: one chunk of N new tokens on an empty cache (causal attention over the chunk);
  logits for the last token only, as engines do.
- decode: a batch of B requests each at context L (the cache holds L-1 tokens, the step writes
  one); attention as grouped queries: the G = heads / kv_heads query heads of one KV head are
  G query rows against that head's L keys (exact for one decode token, no mask), so the kernel
  reads each KV head once, as paged decode kernels do.
- timing: the pass captured in a CUDA graph (eager if capture fails), warmed up, replayed until
  >= 0.3 s and >= 5 replays, CUDA events; the median replay. The same pass with only the
  attention kernels gives the attention share. Also the device's ceilings: an 8192^3 bf16 and
  fp8 GEMM and a 4 GiB device-to-device copy.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

FP8 = torch.float8_e4m3fn
# never the math backend: it materialises the score matrix (68 GB at 32k tokens)
BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
GQA = {"native": True}  # set by probe_gqa: whether those backends take grouped queries
# decode attention: "sdpa" (one kernel, one CTA per (request, KV head): no split over the
# context) or "split" (FlashDecoding: the context cut into chunks, each chunk's partial
# attention with its log-sum-exp from the flash kernel, then combined; what serving engines'
# decode kernels do so that a small batch still fills the GPU)
DECODE_ATTN = {"kind": "sdpa"}
EXTEND = {"how": "lower-right"}  # set by probe_extend


def flash_with_lse(q, k, v):
    """(output, log-sum-exp [batch, heads, q rows]) of non-causal flash attention."""
    if q.is_cuda:
        r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v)
    else:
        r = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    return r[0], r[1]


def split_decode(q: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor) -> torch.Tensor:
    """q [b, hk, g, d] against caches [b, hk, L, d], the L keys cut into S chunks."""
    b, hk, g, d = q.shape
    L = kc.shape[2]
    s = 1
    while s < L // 256 and b * hk * s < 2 * 132:  # >= 2 CTAs per SM, chunks >= 256 tokens
        s *= 2
    kk, vv = kc.view(b * hk, s, L // s, d), vc.view(b * hk, s, L // s, d)
    qq = q.reshape(b * hk, 1, g, d).expand(b * hk, s, g, d).contiguous()
    o, lse = flash_with_lse(qq, kk, vv)
    w = torch.softmax(lse.float(), dim=1).unsqueeze(-1)
    return (o.float() * w).sum(1).to(q.dtype).view(b, hk, g, d)


def probe_gqa(dev: str) -> bool:
    """Whether a non-math SDPA backend runs causal attention with grouped K/V heads."""
    q = torch.randn(1, 8, 256, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, 2, 256, 128, device=dev, dtype=torch.bfloat16)
    try:
        with sdpa_kernel(BACKENDS):
            F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
        return True
    except RuntimeError:
        return False


@dataclass(frozen=True)
class Shape:
    name: str  # pdd-plan model profile
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    qk_norm: bool = False  # Qwen3: RMSNorm on each query and key head before RoPE


LLAMA_8B = Shape("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256)
LLAMA_70B = Shape("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256)
QWEN3_32B = Shape("qwen3-32b", 64, 5120, 64, 8, 128, 25600, 151936, qk_norm=True)
TINY = Shape("tiny", 2, 256, 4, 2, 64, 512, 1000, qk_norm=True)

# (shape, weight dtype, phase, tokens or batch, context): the runs, in order
PLAN = [
    (LLAMA_8B, "bf16", "prefill", 256, 0),
    (LLAMA_8B, "bf16", "prefill", 1024, 0),
    (LLAMA_8B, "bf16", "prefill", 4096, 0),
    (LLAMA_8B, "bf16", "prefill", 16384, 0),
    (LLAMA_8B, "bf16", "prefill", 32768, 0),
    (LLAMA_8B, "bf16", "decode", 1, 2048),
    (LLAMA_8B, "bf16", "decode", 16, 2048),
    (LLAMA_8B, "bf16", "decode", 64, 2048),
    (LLAMA_8B, "bf16", "decode", 256, 2048),
    (LLAMA_8B, "bf16", "decode", 16, 32768),
    (LLAMA_8B, "fp8", "prefill", 256, 0),
    (LLAMA_8B, "fp8", "prefill", 1024, 0),
    (LLAMA_8B, "fp8", "prefill", 4096, 0),
    (LLAMA_8B, "fp8", "prefill", 16384, 0),
    (LLAMA_8B, "fp8", "decode", 1, 2048),
    (LLAMA_8B, "fp8", "decode", 64, 2048),
    (LLAMA_8B, "fp8", "decode", 256, 2048),
    (LLAMA_70B, "fp8", "prefill", 512, 0),
    (LLAMA_70B, "fp8", "prefill", 2048, 0),
    (LLAMA_70B, "fp8", "prefill", 8192, 0),
    (LLAMA_70B, "fp8", "decode", 1, 2048),
    (LLAMA_70B, "fp8", "decode", 16, 2048),
    (LLAMA_70B, "fp8", "decode", 64, 2048),
    (LLAMA_70B, "fp8", "decode", 8, 16384),
]
# a model the h200 calibration never saw (second call: these, then PLAN again for repeatability)
HELD_OUT = [
    (QWEN3_32B, "bf16", "prefill", 512, 0),
    (QWEN3_32B, "bf16", "prefill", 2048, 0),
    (QWEN3_32B, "bf16", "prefill", 8192, 0),
    (QWEN3_32B, "bf16", "decode", 1, 2048),
    (QWEN3_32B, "bf16", "decode", 16, 2048),
    (QWEN3_32B, "bf16", "decode", 64, 2048),
    (QWEN3_32B, "bf16", "decode", 16, 8192),
]
# extend: a chunk of new tokens on a cached prefix (phase "extend": tokens new, context cached),
# the PDD prefill's shape (64K contexts, ~90% cached)
EXTEND_PLAN = [
    (LLAMA_8B, "bf16", "extend", 4096, 4096),
    (LLAMA_8B, "bf16", "extend", 4096, 16384),
    (LLAMA_8B, "bf16", "extend", 4096, 57344),
    (LLAMA_8B, "bf16", "extend", 1024, 31744),
    (QWEN3_32B, "bf16", "extend", 4096, 28672),
    (LLAMA_70B, "fp8", "extend", 2048, 30720),
    (LLAMA_70B, "fp8", "extend", 6144, 57344),
]
DRY_PLAN = [
    (TINY, "bf16", "extend", 32, 96),
    (TINY, "bf16", "prefill", 64, 0),
    (TINY, "bf16", "decode", 4, 128),
    (TINY, "fp8", "prefill", 64, 0),
    (TINY, "fp8", "decode", 4, 128),
]


# ------------------------------------------------------------------ weights and GEMMs


class Linear:
    """y = x @ W^T with W [out, in]; bf16 matmul or fp8 _scaled_mm with per-tensor scales."""

    def __init__(self, n_in: int, n_out: int, dtype: str, dev: str):
        w = torch.randn(n_out, n_in, device=dev, dtype=torch.bfloat16) / math.sqrt(n_in)
        self.fp8 = dtype == "fp8"
        if self.fp8:
            self.scale_w = (w.abs().amax().float() / 448.0).reshape(())
            self.w = (w / self.scale_w).to(FP8)  # [out, in] row-major: .t() is column-major
            self.scale_x = torch.tensor(1.0 / 64.0, device=dev)  # activations within +-28k
            del w
        else:
            self.w = w

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if not self.fp8:
            return x @ self.w.t()
        m = x.shape[0]
        pad = (-m) % 16
        if pad:
            x = F.pad(x, (0, 0, 0, pad))
        xq = (x * (1.0 / self.scale_x)).to(FP8)
        y = torch._scaled_mm(
            xq, self.w.t(), scale_a=self.scale_x, scale_b=self.scale_w, out_dtype=torch.bfloat16
        )
        return y[:m] if pad else y


class Layer:
    def __init__(self, s: Shape, dtype: str, dev: str):
        qkv = (s.heads + 2 * s.kv_heads) * s.head_dim
        self.qkv = Linear(s.hidden, qkv, dtype, dev)
        self.o = Linear(s.heads * s.head_dim, s.hidden, dtype, dev)
        self.gate_up = Linear(s.hidden, 2 * s.ffn, dtype, dev)
        self.down = Linear(s.ffn, s.hidden, dtype, dev)
        self.n1 = torch.ones(s.hidden, device=dev, dtype=torch.bfloat16)
        self.n2 = torch.ones(s.hidden, device=dev, dtype=torch.bfloat16)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [tokens, heads, d]; cos/sin [tokens, 1, d/2] (rotate-half form)."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)


# ------------------------------------------------------------------ passes


class Model:
    def __init__(self, s: Shape, dtype: str, dev: str):
        self.s, self.dev = s, dev
        self.layers = [Layer(s, dtype, dev) for _ in range(s.layers)]
        self.norm = torch.ones(s.hidden, device=dev, dtype=torch.bfloat16)
        self.head = Linear(s.hidden, s.vocab, "bf16", dev)  # engines keep the LM head in bf16
        self.qn = torch.ones(s.head_dim, device=dev, dtype=torch.bfloat16)

    def qk_norm(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.s.qk_norm:
            return q, k
        d = self.s.head_dim
        return F.rms_norm(q, (d,), self.qn), F.rms_norm(k, (d,), self.qn)

    def rope_tables(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.s.head_dim
        inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2, device=self.dev).float() / d))
        ang = pos.float()[:, None] * inv[None, :]
        return ang.cos().to(torch.bfloat16)[:, None], ang.sin().to(torch.bfloat16)[:, None]


def extend_attention(q, k, v, n: int) -> torch.Tensor:
    """Causal attention of the last n positions (q [1, hq, n, d]) over k/v [1, hk, C + n, d]."""
    if EXTEND["how"] == "lower-right":
        mask = causal_lower_right(n, k.shape[2])
        with sdpa_kernel(BACKENDS):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    # merge: the cached part without a mask, the new block causally (q and k of equal length),
    # combined by their log-sum-exps, as an extend kernel does in one pass
    c = k.shape[2] - n
    if EXTEND.get("expand"):  # the flash op without grouped heads: one K/V per query head
        g = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    o1, l1 = flash_with_lse(q, k[:, :, :c], v[:, :, :c])
    o2, l2 = flash_with_lse_causal(q, k[:, :, c:], v[:, :, c:])
    w1 = torch.sigmoid(l1 - l2).unsqueeze(-1)  # e^l1 / (e^l1 + e^l2)
    return (o1.float() * w1 + o2.float() * (1 - w1)).to(q.dtype)


def flash_with_lse_causal(q, k, v):
    if q.is_cuda:
        r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True)
    else:
        r = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
    return r[0], r[1]


def probe_extend(dev: str) -> str:
    """How extend attention runs here: 'lower-right' (one SDPA call with a lower-right causal
    mask), 'merge' (two flash calls merged by log-sum-exp) or 'none'."""
    q = torch.randn(1, 8, 64, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, 2, 192, 128, device=dev, dtype=torch.bfloat16)
    tries = [("lower-right", False), ("merge", False), ("merge", True)]
    if EXTEND.get("force") == "merge":
        tries = tries[1:]
    for how, expand in tries:
        EXTEND["how"], EXTEND["expand"] = how, expand
        try:
            extend_attention(q, k, k, 64)
            return how + (" (K/V expanded)" if expand else "")
        except (RuntimeError, TypeError, NotImplementedError):
            continue
    return "none"


def prefill_fn(model: Model, n: int, attn_only: bool, cached: int = 0):
    s, dev = model.s, model.dev
    x0 = torch.randn(n, s.hidden, device=dev, dtype=torch.bfloat16)
    cos, sin = model.rope_tables(torch.arange(cached, cached + n, device=dev))
    shape = (1, s.kv_heads, cached + n, s.head_dim)
    kc = (
        [torch.randn(shape, device=dev, dtype=torch.bfloat16) for _ in range(s.layers)]
        if cached
        else []
    )
    vc = (
        [torch.randn(shape, device=dev, dtype=torch.bfloat16) for _ in range(s.layers)]
        if cached
        else []
    )
    # attention-only: fixed q/k/v of the chunk's shape, one set per layer (no L2 reuse)
    qkv_fixed = (
        [
            torch.randn(n, (s.heads + 2 * s.kv_heads) * s.head_dim, device=dev).to(torch.bfloat16)
            for _ in range(s.layers)
        ]
        if attn_only
        else None
    )
    hq, hk, d = s.heads, s.kv_heads, s.head_dim
    qk_norm = model.qk_norm

    def attend(qkv: torch.Tensor, i: int) -> torch.Tensor:
        q, k, v = qkv.split([hq * d, hk * d, hk * d], dim=-1)
        q, k = qk_norm(q.view(n, hq, d), k.view(n, hk, d))
        q = rope(q, cos, sin).transpose(0, 1)[None]
        k = rope(k, cos, sin).transpose(0, 1)[None]
        v = v.view(n, hk, d).transpose(0, 1)[None]
        if cached:  # write the chunk's K/V behind the cached ones, attend over all of them
            kc[i][:, :, cached:] = k
            vc[i][:, :, cached:] = v
            o = extend_attention(q, kc[i], vc[i], n)
            return o[0].transpose(0, 1).reshape(n, hq * d)
        if not GQA["native"]:  # the backend lacks grouped queries: expand K/V to every head
            k, v = k.repeat_interleave(hq // hk, dim=1), v.repeat_interleave(hq // hk, dim=1)
        with sdpa_kernel(BACKENDS):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=GQA["native"])
        return o[0].transpose(0, 1).reshape(n, hq * d)

    def fn():
        if attn_only:
            return [attend(t, i) for i, t in enumerate(qkv_fixed)]
        x = x0
        for i, ly in enumerate(model.layers):
            h = F.rms_norm(x, (s.hidden,), ly.n1)
            x = x + ly.o(attend(ly.qkv(h), i))
            h = F.rms_norm(x, (s.hidden,), ly.n2)
            g, u = ly.gate_up(h).chunk(2, dim=-1)
            x = x + ly.down(F.silu(g) * u)
        last = F.rms_norm(x[-1:], (s.hidden,), model.norm)
        return model.head(last)

    return fn


def decode_fn(model: Model, b: int, ctx: int, attn_only: bool):
    s, dev = model.s, model.dev
    hq, hk, d = s.heads, s.kv_heads, s.head_dim
    g = hq // hk
    qk_norm = model.qk_norm
    # each layer's cache [b, hk, ctx, d]; the step writes position ctx-1
    kc = [torch.randn(b, hk, ctx, d, device=dev, dtype=torch.bfloat16) for _ in model.layers]
    vc = [torch.randn(b, hk, ctx, d, device=dev, dtype=torch.bfloat16) for _ in model.layers]
    x0 = torch.randn(b, s.hidden, device=dev, dtype=torch.bfloat16)
    cos, sin = model.rope_tables(torch.full((b,), ctx - 1, device=dev))
    qkv_fixed = torch.randn(b, (hq + 2 * hk) * d, device=dev).to(torch.bfloat16)

    def attend(qkv: torch.Tensor, i: int) -> torch.Tensor:
        q, k, v = qkv.split([hq * d, hk * d, hk * d], dim=-1)
        q, k = qk_norm(q.view(b, hq, d), k.view(b, hk, d))
        q = rope(q, cos, sin)
        k = rope(k, cos, sin)
        kc[i][:, :, ctx - 1] = k
        vc[i][:, :, ctx - 1] = v.view(b, hk, d)
        q = q.view(b, hk, g, d)  # the G query heads of a KV head as G query rows
        if DECODE_ATTN["kind"] == "split":
            o = split_decode(q, kc[i], vc[i])
        else:
            with sdpa_kernel(BACKENDS):
                o = F.scaled_dot_product_attention(q, kc[i], vc[i])
        return o.reshape(b, hq * d)

    def fn():
        if attn_only:
            return [attend(qkv_fixed, i) for i in range(s.layers)]
        x = x0
        for i, ly in enumerate(model.layers):
            h = F.rms_norm(x, (s.hidden,), ly.n1)
            x = x + ly.o(attend(ly.qkv(h), i))
            h = F.rms_norm(x, (s.hidden,), ly.n2)
            gg, u = ly.gate_up(h).chunk(2, dim=-1)
            x = x + ly.down(F.silu(gg) * u)
        return model.head(F.rms_norm(x, (s.hidden,), model.norm))

    return fn, (kc, vc)


# ------------------------------------------------------------------ timing


def time_fn(fn, dev: str, min_s: float = 0.3, min_reps: int = 5) -> tuple[float, str]:
    """Median seconds of one call; (seconds, 'graph' | 'eager')."""
    if dev != "cuda":
        fn()
        ts = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return sorted(ts)[1], "eager-cpu"
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    mode, run = "eager", fn
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        run, mode = graph.replay, "graph"
        run()
        torch.cuda.synchronize()
    except Exception as exc:  # capture unsupported for some kernel: eager timing
        print(f"  graph capture failed ({type(exc).__name__}: {exc}); eager", flush=True)
        torch.cuda.synchronize()
        run, mode = fn, "eager"
    ts: list[float] = []
    total = 0.0
    while len(ts) < min_reps or total < min_s:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        t = a.elapsed_time(b) / 1e3
        ts.append(t)
        total += t
        if len(ts) >= 200:
            break
    ts.sort()
    return ts[len(ts) // 2], mode


def ceilings(dev: str) -> dict:
    """The device's own ceilings: bf16 and fp8 8192^3 GEMMs, a 4 GiB copy."""
    if dev != "cuda":
        return {}
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    t_bf16, _ = time_fn(lambda: a @ b, dev, min_s=0.2, min_reps=10)
    a8, b8 = a.to(FP8), b.to(FP8).t().contiguous().t()
    one = torch.tensor(1.0, device=dev)
    t_fp8, _ = time_fn(
        lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
        dev,
        min_s=0.2,
        min_reps=10,
    )
    big = torch.randn(4 << 30, device=dev, dtype=torch.bfloat16)  # 8 GiB read once
    t_rd, _ = time_fn(lambda: big.sum(), dev, min_s=0.2, min_reps=10)
    src = torch.empty(4 << 30, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    t_cp, _ = time_fn(lambda: dst.copy_(src), dev, min_s=0.2, min_reps=10)
    return {  # the buffers go with this frame; main empties the cache before the runs
        "bf16_gemm_tflops": 2 * n**3 / t_bf16 / 1e12,
        "fp8_gemm_tflops": 2 * n**3 / t_fp8 / 1e12,
        "copy_read_plus_write_tbps": 2 * (4 << 30) / t_cp / 1e12,
        "read_tbps": 2 * (4 << 30) / t_rd / 1e12,
    }


def kv_bytes(s: Shape, b: int, ctx: int) -> int:
    return 2 * s.layers * b * s.kv_heads * ctx * s.head_dim * 2


def run_one(model: Model, phase: str, n: int, ctx: int, dev: str) -> dict:
    s = model.s
    if phase in ("prefill", "extend"):
        cached = ctx if phase == "extend" else 0
        fn = prefill_fn(model, n, False, cached)
        t, mode = time_fn(fn, dev)
        del fn
        if dev == "cuda":
            torch.cuda.empty_cache()
        t_att, _ = time_fn(prefill_fn(model, n, True, cached), dev)
        rec = {"tokens": n, "context": cached, "batch": 1}
    else:
        fn, cache = decode_fn(model, n, ctx, False)
        t, mode = time_fn(fn, dev)
        del fn, cache  # one cache at a time: the 32k-context runs hold most of the HBM
        if dev == "cuda":
            torch.cuda.empty_cache()
        fa, cache = decode_fn(model, n, ctx, True)
        t_att, _ = time_fn(fa, dev)
        del fa, cache
        rec = {"tokens": n, "context": ctx, "batch": n}
    return {
        "model": s.name,
        "layers": s.layers,
        "phase": phase,
        **rec,
        "pass_s": t,
        "attention_s": t_att,
        "timing": mode,
        "gqa": "native" if GQA["native"] else "expanded",
        "decode_attention": DECODE_ATTN["kind"] if phase == "decode" else None,
        "extend_attention": EXTEND["label"] if phase == "extend" else None,
        "kv_bytes": kv_bytes(s, n, ctx) if phase == "decode" else 0,
        "phase_note": "tokens new on context cached" if phase == "extend" else None,
    }


def environment(dev: str) -> dict:
    env = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    if dev == "cuda":
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, sms=p.multi_processor_count, memory_gib=p.total_memory / 2**30)
        env["cuda"] = torch.version.cuda
        try:
            q = "driver_version,clocks.max.sm,clocks.max.mem,power.limit"
            env["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.strip()
        except Exception as exc:  # the figures stand without it
            env["nvidia_smi"] = f"unavailable: {exc}"
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for layers.json")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes")
    ap.add_argument("--second", action="store_true", help="held-out model, then PLAN again")
    ap.add_argument("--split-decode", action="store_true", help="decode runs, split-KV attention")
    ap.add_argument("--extend", action="store_true", help="extend runs only")
    ap.add_argument("--extend-merge", action="store_true", help="extend by two flash calls")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting runs after this")
    args = ap.parse_args()
    dev = "cpu" if args.dry_run else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    t_start = time.time()
    GQA["native"] = probe_gqa(dev)
    out = {"environment": environment(dev), "ceilings": ceilings(dev), "runs": []}
    print(json.dumps(out["ceilings"]), flush=True)
    plan = DRY_PLAN if args.dry_run else (HELD_OUT + PLAN if args.second else PLAN)
    if args.extend_merge:
        EXTEND["force"] = "merge"
    EXTEND["label"] = probe_extend(dev)
    if args.extend:
        plan = [r for r in DRY_PLAN if r[2] == "extend"] if args.dry_run else EXTEND_PLAN
    if args.split_decode:
        DECODE_ATTN["kind"] = "split"
        plan = [r for r in (plan if args.dry_run else HELD_OUT + PLAN) if r[2] == "decode"]
    model, key = None, None
    path = f"{args.out}/layers.json"
    for shape, dtype, phase, n, ctx in plan:
        if time.time() - t_start > args.budget_s:
            print("budget spent; stopping", flush=True)
            break
        if key != (shape.name, dtype):
            model = None
            if dev == "cuda":
                torch.cuda.empty_cache()
            model, key = Model(shape, dtype, dev), (shape.name, dtype)
        try:
            rec = run_one(model, phase, n, ctx, dev)
        except Exception as exc:  # keep the other runs
            rec = {"model": shape.name, "phase": phase, "tokens": n, "context": ctx,
                   "error": f"{type(exc).__name__}: {exc}"[:300]}  # fmt: skip
        rec["dtype"] = dtype
        out["runs"].append(rec)
        print(json.dumps(rec), flush=True)
        if dev == "cuda":
            torch.cuda.empty_cache()
        with open(path, "w") as f:  # after every run: a timeout keeps what was measured
            json.dump(out, f, indent=1)
    model = None
    if dev == "cuda":
        torch.cuda.empty_cache()
    finish(out, path, dev, t_start)
    return 0


def finish(out: dict, path: str, dev: str, t_start: float) -> None:
    """The ceilings again (the clocks warm from the runs) and the wall time, then the file."""
    out["ceilings_after"] = ceilings(dev)
    print(json.dumps(out["ceilings_after"]), flush=True)
    out["wall_s"] = time.time() - t_start
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
