"""Time DeepSeek-V3's MoE pieces on one GPU with random weights: the shape of the curves.

Run on the GPU machine from the repository root (torch with CUDA; nothing of pdd_plan is
imported, so it runs in the machine's own python):

    python3 -m benchmarks.h200_moe --out DIR              # ~2-3 min on one H200 or H100
    python3 -m benchmarks.h200_moe --out DIR --dry-run    # CPU, tiny shapes: checks the code

It writes DIR/moe.json after every timing (a timeout keeps what was measured); here,
`python -m benchmarks.h200_moe_rows FILE` sets the figures beside the perf model's terms.

Three pieces (shapes, plan and FLOP/byte counts in benchmarks/moe_shapes.py):

- **grouped GEMM**: E experts' gate/up GEMM (7168 -> 4096) and down GEMM (2048 -> 7168), M
  tokens per expert (1..4096), E = 32 and 8 (EP 8 and EP 32 of 256 experts), bf16 through one
  `torch.bmm` per GEMM, fp8 (e4m3, per-tensor scales, bf16 out) through `torch._scaled_mm` per
  expert (torch has no batched fp8 GEMM for every version; the loop is captured in one CUDA
  graph, so what it adds is kernel boundaries, not launches); pre-made inputs, no activation
  between the GEMMs: the GEMMs alone, what the model's grouped-GEMM term prices;
- **absorbed MLA decode attention**: H query heads (128: DP attention; 16: TP 8) of B requests
  against each request's L cached latent tokens (576 = 512 latent + 64 rope), scores by
  `torch.bmm`, a float32 softmax, values by `torch.bmm` (not FlashMLA: the scores go through
  HBM, so the level is below a fused kernel's; how the time moves with L and B is the point);
- **one decoder layer at an EP shard** (decode, DP attention, bf16): the MLA projections, the
  weight absorption, the attention above, the output projection, the router and its top-8, the
  shared expert and E = 256 / EP local experts at balanced routing (M = B x 8 x EP / 256 tokens
  each, pre-gathered: one GPU has no all-to-all), with the attention and the experts also timed
  alone.

Timing: each piece captured in a CUDA graph and replayed (benchmarks/h200_layers.py
`time_fn`: >= 0.3 s and >= 5 replays, the median); the device's own ceilings (an 8192^3 bf16
and fp8 GEMM, an 8 GiB read) before and after. Plain-torch kernels are not DeepGEMM, FlashMLA or
DeepEP: keep these for how efficiency moves with tokens per expert, context and batch, not for
the level (the issue's rule).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from benchmarks import moe_shapes as S
from benchmarks.h200_layers import FP8, ceilings, environment, finish, time_fn

BF16 = torch.bfloat16


class Dims:
    """The model's widths: DeepSeek-V3's, or the dry run's tiny ones."""

    def __init__(self, dry: bool):
        self.hidden = S.DRY["hidden"] if dry else S.HIDDEN
        self.inter = S.DRY["inter"] if dry else S.MOE_INTER
        self.q_lora = 32 if dry else S.Q_LORA
        self.kv_lora = 16 if dry else S.KV_LORA
        self.rope = 8 if dry else S.ROPE
        self.nope = 8 if dry else S.NOPE
        self.v_head = 8 if dry else S.V_HEAD
        self.heads = 4 if dry else S.HEADS
        self.latent = self.kv_lora + self.rope


def _w(*shape: int, dev: str, scale: float = 0.02) -> torch.Tensor:
    return torch.randn(*shape, device=dev, dtype=BF16) * scale


def _fp8(x: torch.Tensor) -> torch.Tensor:
    return x.to(FP8)


def grouped_gemm_fn(d: Dims, experts: int, m: int, dtype: str, dev: str):
    """The experts' two GEMMs on pre-made inputs."""
    x = _w(experts, m, d.hidden, dev=dev, scale=1.0)
    h = _w(experts, m, d.inter, dev=dev, scale=1.0)
    w_up = _w(experts, d.hidden, 2 * d.inter, dev=dev)
    w_down = _w(experts, d.inter, d.hidden, dev=dev)
    if dtype == "bf16" or dev != "cuda":  # the CPU has no fp8 GEMM: bf16 checks the code path

        def run():
            torch.bmm(x, w_up)
            torch.bmm(h, w_down)

        return run, "bmm" if dtype == "bf16" else "bmm (fp8 on CPU: bf16)"
    one = torch.tensor(1.0, device=dev)
    pad = (m + 15) // 16 * 16  # cuBLASLt's fp8 rows come in 16s
    x8 = _fp8(_w(experts, pad, d.hidden, dev=dev, scale=1.0))
    h8 = _fp8(_w(experts, pad, d.inter, dev=dev, scale=1.0))
    # column-major weights, as _scaled_mm asks for its second operand
    up8 = [_fp8(w_up[e]).t().contiguous().t() for e in range(experts)]
    down8 = [_fp8(w_down[e]).t().contiguous().t() for e in range(experts)]

    def run8():
        for e in range(experts):
            torch._scaled_mm(x8[e], up8[e], scale_a=one, scale_b=one, out_dtype=BF16)
            torch._scaled_mm(h8[e], down8[e], scale_a=one, scale_b=one, out_dtype=BF16)

    return run8, f"_scaled_mm x {experts} (rows padded to {pad})"


class MLA:
    """Absorbed MLA decode attention: B requests, H heads, L cached latent tokens each."""

    def __init__(self, d: Dims, heads: int, batch: int, context: int, dev: str):
        self.d = d
        self.q = _w(batch, heads, d.latent, dev=dev, scale=1.0)
        self.cache = _w(batch, context, d.latent, dev=dev, scale=1.0)
        self.scale = (d.nope + d.rope) ** -0.5

    def __call__(self) -> torch.Tensor:
        s = torch.bmm(self.q, self.cache.transpose(1, 2))
        p = torch.softmax(s.float() * self.scale, dim=-1).to(BF16)
        return torch.bmm(p, self.cache[..., : self.d.kv_lora])


class Layer:
    """One DeepSeek-V3 decoder layer's decode step at an EP shard (see the module's text)."""

    def __init__(self, d: Dims, batch: int, context: int, ep: int, dev: str):
        self.d, self.b = d, batch
        hd, h = d.hidden, d.heads
        experts = max(S.EXPERTS // ep, 1)
        m = max(round(S.tokens_per_expert(batch, ep)), 1)
        self.experts, self.m = experts, m
        self.x = _w(batch, hd, dev=dev, scale=1.0)
        self.q_a = _w(hd, d.q_lora, dev=dev)
        self.q_b = _w(d.q_lora, h * (d.nope + d.rope), dev=dev)
        self.kv_a = _w(hd, d.latent, dev=dev)
        self.w_uk = _w(h, d.nope, d.kv_lora, dev=dev)  # absorbed into the query
        self.w_uv = _w(h, d.kv_lora, d.v_head, dev=dev)  # absorbed into the output
        self.o = _w(h * d.v_head, hd, dev=dev)
        self.router = _w(hd, S.EXPERTS, dev=dev)
        self.shared_up = _w(hd, 2 * d.inter, dev=dev)
        self.shared_down = _w(d.inter, hd, dev=dev)
        self.routed_x = _w(experts, m, hd, dev=dev, scale=1.0)
        self.up = _w(experts, hd, 2 * d.inter, dev=dev)
        self.down = _w(experts, d.inter, hd, dev=dev)
        self.mla = MLA(d, h, batch, context, dev)
        self.pos = context - 1

    @staticmethod
    def _rms(x: torch.Tensor) -> torch.Tensor:
        """RMSNorm without its weights (a per-channel scale: nothing to time apart)."""
        v = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(v + 1e-6)).to(BF16)

    def experts_only(self) -> torch.Tensor:
        g = torch.bmm(self.routed_x, self.up)
        a = torch.nn.functional.silu(g[..., : self.d.inter]) * g[..., self.d.inter :]
        return torch.bmm(a, self.down)

    def attention_only(self) -> torch.Tensor:
        return self.mla()

    def __call__(self) -> torch.Tensor:
        d, b, h = self.d, self.b, self.d.heads
        x = self._rms(self.x)
        q = (self._rms(x @ self.q_a) @ self.q_b).view(b, h, d.nope + d.rope)
        kv = x @ self.kv_a
        self.mla.cache[:, self.pos] = kv  # the step's token into the cache
        q_lat = torch.bmm(q[..., : d.nope].transpose(0, 1), self.w_uk).transpose(0, 1)
        self.mla.q[..., : d.kv_lora] = q_lat
        self.mla.q[..., d.kv_lora :] = q[..., d.nope :]
        o_lat = self.mla()  # (b, h, kv_lora)
        o = torch.bmm(o_lat.transpose(0, 1), self.w_uv).transpose(0, 1).reshape(b, -1)
        y = self.x + o @ self.o
        z = self._rms(y)
        torch.topk(z @ self.router, 8, dim=-1)  # the router; balanced routing below
        s = z @ self.shared_up
        s = torch.nn.functional.silu(s[:, : d.inter]) * s[:, d.inter :]
        self.experts_only()  # the local experts' tokens (pre-gathered: no all-to-all here)
        return y + s @ self.shared_down


def _record(out: dict, path: str, rec: dict) -> None:
    out["runs"].append(rec)
    print(json.dumps(rec), flush=True)
    with open(path, "w") as f:  # after every timing: a timeout keeps what was measured
        json.dump(out, f, indent=1)


def _free(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.empty_cache()


def _guarded(fn, base: dict) -> dict:
    try:
        return {**base, **fn()}
    except Exception as exc:  # keep the other timings
        return {**base, "error": f"{type(exc).__name__}: {exc}"[:300]}


def grouped_gemm_runs(d: Dims, dev: str, dry: bool):
    """(record's keys, timing) of each grouped-GEMM point."""
    experts = S.DRY["gg_experts"] if dry else S.GG_EXPERTS
    tokens = S.DRY["gg_tokens"] if dry else S.GG_TOKENS
    for dtype in S.GG_DTYPES:
        for e in experts:
            for m in tokens:

                def one(e=e, m=m, dtype=dtype):
                    fn, how = grouped_gemm_fn(d, e, m, dtype, dev)
                    t, mode = time_fn(fn, dev)
                    return {"seconds": t, "timing": mode, "kernels": how}

                base = {"piece": "grouped_gemm", "dtype": dtype, "experts": e, "tokens": m,
                        "hidden": d.hidden, "inter": d.inter}  # fmt: skip
                yield base, one


def mla_runs(d: Dims, dev: str, dry: bool):
    """(record's keys, timing) of each MLA decode point."""
    for heads, batch, context in S.mla_plan(dry):

        def one(heads=heads, batch=batch, context=context):
            t, mode = time_fn(MLA(d, heads, batch, context, dev), dev)
            return {"seconds": t, "timing": mode}

        base = {"piece": "mla_decode", "heads": heads, "batch": batch, "context": context,
                "latent": d.latent, "kv_lora": d.kv_lora}  # fmt: skip
        yield base, one


def layer_runs(d: Dims, dev: str, dry: bool):
    """(record's keys, timing) of each layer point: whole, attention alone, experts alone."""
    for batch, context, ep in S.layer_plan(dry):

        def one(batch=batch, context=context, ep=ep):
            layer = Layer(d, batch, context, ep, dev)
            t, mode = time_fn(layer, dev)
            t_att, _ = time_fn(layer.attention_only, dev)
            t_exp, _ = time_fn(layer.experts_only, dev)
            return {"seconds": t, "attention_s": t_att, "experts_s": t_exp, "timing": mode,
                    "local_experts": layer.experts, "tokens_per_expert": layer.m}  # fmt: skip

        base = {"piece": "layer", "batch": batch, "context": context, "ep": ep, "heads": d.heads,
                "hidden": d.hidden}  # fmt: skip
        yield base, one


def records(d: Dims, dev: str, dry: bool):
    """Every piece's records in order, each timed as it is asked for (an error kept in its
    record, the device's cache emptied after each)."""
    for runs in (grouped_gemm_runs, mla_runs, layer_runs):
        for base, one in runs(d, dev, dry):
            yield _guarded(one, base)
            _free(dev)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for moe.json")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes")
    ap.add_argument(
        "--budget-s", type=float, default=420.0, help="stop starting timings after this"
    )
    args = ap.parse_args()
    dev = "cpu" if args.dry_run else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    t0 = time.time()
    torch.manual_seed(0)
    d = Dims(args.dry_run)
    out = {"environment": environment(dev), "ceilings": ceilings(dev), "runs": []}
    print(json.dumps(out["ceilings"]), flush=True)
    _free(dev)
    path = f"{args.out}/moe.json"
    for rec in records(d, dev, args.dry_run):
        _record(out, path, rec)
        if time.time() - t0 > args.budget_s:
            print("budget spent; stopping", flush=True)
            break
    finish(out, path, dev, t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
