"""The MoE kernel timings (`benchmarks/h200_moe.py`'s moe.json) beside the perf model's terms.

Run: python -m benchmarks.h200_moe_rows FILE [--markdown]

Nothing is fitted: each timing is set beside what the model's own law gives for the same piece
on the device's measured ceilings (the 8192^3 GEMM of the piece's dtype and the 8 GiB read of
the same run), so that the comparison is of shapes (how the time moves with tokens per expert,
context and batch), not of levels (plain-torch kernels are not DeepGEMM or FlashMLA):

* grouped GEMM: the rounded roofline of every GEMM class (`perf/moe_terms.kernel_seconds`,
  sharpness from moe-serving.yaml) at mfu = mbu = 1 on the ceilings; `measured / law` flat in
  the tokens per expert means the model's corner is where the kernels' is;
* MLA decode: the latent-attention law, max(FLOPs / compute, bytes / bandwidth) with the
  kernels' fractions of peak (moe-serving.yaml attention_kernels) on the ceilings; the model
  holds those fractions constant, so `measured / law` flat in context and batch means the
  constant fractions have the right shape;
* the layer: its time, and the attention's and the experts' shares of it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks import moe_shapes as S
from pdd_plan.perf.comm import serving
from pdd_plan.perf.moe_terms import kernel_seconds


def _peak(ceil: dict, dtype: str) -> float:
    """FLOP/s of the measured 8192^3 GEMM in `dtype`."""
    return ceil[f"{dtype}_gemm_tflops"] * 1e12


def grouped_gemm_row(r: dict, ceil: dict) -> dict:
    """A grouped-GEMM timing's fractions of the ceilings and its ratio to the rounded roofline."""
    e, m, dtype = r["experts"], r["tokens"], r["dtype"]
    flops = S.grouped_gemm_flops(e, m, r["hidden"], r["inter"])
    nbytes = S.grouped_gemm_bytes(e, m, dtype, r["hidden"], r["inter"])
    c, mem = flops / _peak(ceil, dtype), nbytes / (ceil["read_tbps"] * 1e12)
    law = float(kernel_seconds(c, mem))
    t = r["seconds"]
    return {
        "dtype": dtype,
        "experts": e,
        "tokens": m,
        "seconds": t,
        "flop_fraction": c / t,
        "byte_fraction": mem / t,
        "law_s": law,
        "ratio": t / law,
    }


def mla_row(r: dict, ceil: dict) -> dict:
    """An MLA decode timing against the latent-attention law on the ceilings."""
    h, b, ctx = r["heads"], r["batch"], r["context"]
    flops = S.mla_flops(b, h, ctx, r["latent"], r["kv_lora"])
    nbytes = S.mla_bytes(b, h, ctx, r["latent"], r["kv_lora"])
    k = serving().attention_kernels
    c = flops / (_peak(ceil, "bf16") * k.compute_fraction)
    mem = nbytes / (ceil["read_tbps"] * 1e12 * k.memory_fraction)
    law = max(c, mem)
    t = r["seconds"]
    return {
        "heads": h,
        "batch": b,
        "context": ctx,
        "seconds": t,
        "byte_fraction": nbytes / (ceil["read_tbps"] * 1e12) / t,
        "flop_fraction": flops / _peak(ceil, "bf16") / t,
        "bound": "compute" if c >= mem else "memory",
        "law_s": law,
        "ratio": t / law,
    }


def layer_row(r: dict) -> dict:
    t = r["seconds"]
    return {
        "batch": r["batch"],
        "context": r["context"],
        "ep": r["ep"],
        "tokens_per_expert": r["tokens_per_expert"],
        "seconds": t,
        "attention_share": r["attention_s"] / t,
        "experts_share": r["experts_s"] / t,
    }


def rows(data: dict) -> dict[str, list[dict]]:
    """Every timing without an error, by piece, beside its law."""
    ceil = data["ceilings"]
    ok = [r for r in data["runs"] if "error" not in r]
    return {
        "grouped_gemm": [grouped_gemm_row(r, ceil) for r in ok if r["piece"] == "grouped_gemm"],
        "mla_decode": [mla_row(r, ceil) for r in ok if r["piece"] == "mla_decode"],
        "layer": [layer_row(r) for r in ok if r["piece"] == "layer"],
    }


def spread(ratios: list[float]) -> float:
    """max / min of a curve's measured / law: 1 is the law's shape exactly."""
    return max(ratios) / min(ratios) if ratios else float("nan")


def shape_summary(out: dict[str, list[dict]]) -> list[str]:
    """One line per curve: the ratio at its ends, its median and its spread."""
    lines = []
    curves: dict[tuple, list[dict]] = {}
    for r in out["grouped_gemm"]:
        curves.setdefault(("grouped GEMM", r["dtype"], f"E={r['experts']}"), []).append(r)
    for r in out["mla_decode"]:
        curves.setdefault(("MLA decode", f"H={r['heads']}", f"B={r['batch']}"), []).append(r)
    for key, pts in curves.items():
        ratios = [p["ratio"] for p in pts]
        lines.append(
            f"{' '.join(key)}: measured / law {ratios[0]:.2f} (first) .. {ratios[-1]:.2f} (last), "
            f"median {statistics.median(ratios):.2f}, spread {spread(ratios):.2f}x"
        )
    return lines


# each table: (its rows in `rows()`'s output, [(header, right-aligned, cell of a row)])
TABLES = {
    "grouped_gemm": [
        ("dtype", False, lambda r: r["dtype"]),
        ("E", True, lambda r: r["experts"]),
        ("tokens/expert", True, lambda r: r["tokens"]),
        ("us", True, lambda r: f"{r['seconds'] * 1e6:.1f}"),
        ("FLOP frac", True, lambda r: f"{r['flop_fraction']:.2f}"),
        ("byte frac", True, lambda r: f"{r['byte_fraction']:.2f}"),
        ("law us", True, lambda r: f"{r['law_s'] * 1e6:.1f}"),
        ("measured/law", True, lambda r: f"{r['ratio']:.2f}"),
    ],
    "mla_decode": [
        ("heads", True, lambda r: r["heads"]),
        ("batch", True, lambda r: r["batch"]),
        ("context", True, lambda r: r["context"]),
        ("us", True, lambda r: f"{r['seconds'] * 1e6:.1f}"),
        ("byte frac", True, lambda r: f"{r['byte_fraction']:.2f}"),
        ("FLOP frac", True, lambda r: f"{r['flop_fraction']:.2f}"),
        ("bound", False, lambda r: r["bound"]),
        ("measured/law", True, lambda r: f"{r['ratio']:.2f}"),
    ],
    "layer": [
        ("batch", True, lambda r: r["batch"]),
        ("context", True, lambda r: r["context"]),
        ("EP", True, lambda r: r["ep"]),
        ("tokens/expert", True, lambda r: r["tokens_per_expert"]),
        ("us", True, lambda r: f"{r['seconds'] * 1e6:.1f}"),
        ("attention", True, lambda r: f"{r['attention_share']:.0%}"),
        ("experts", True, lambda r: f"{r['experts_share']:.0%}"),
    ],
}


def markdown(out: dict[str, list[dict]]) -> str:
    """The three tables in Markdown, one after the other."""
    tables = []
    for piece, cols in TABLES.items():
        lines = ["| " + " | ".join(h for h, _, _ in cols) + " |",
                 "|" + "|".join("---:" if right else "---" for _, right, _ in cols) + "|"]  # fmt: skip
        lines += ["| " + " | ".join(str(cell(r)) for _, _, cell in cols) + " |" for r in out[piece]]
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path, help="moe.json from benchmarks/h200_moe.py")
    ap.add_argument("--markdown", action="store_true", help="the tables in Markdown")
    args = ap.parse_args()
    try:
        data = json.loads(args.file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SystemExit(
            f"{args.file}: cannot read it as moe.json ({e}): give the file h200_moe.py wrote"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise SystemExit(f"{args.file}: no 'runs' list: give the moe.json h200_moe.py wrote")
    if not data.get("ceilings"):
        raise SystemExit(f"{args.file}: no ceilings (a --dry-run file): nothing to compare")
    try:
        out = rows(data)
    except (KeyError, TypeError) as e:
        raise SystemExit(
            f"{args.file}: a run lacks field {e}: give the moe.json h200_moe.py wrote"
        ) from None
    env = data.get("environment") or {}
    print(f"{env.get('gpu', '?')}, {env.get('date', '?')}")
    for line in shape_summary(out):
        print(line)
    if args.markdown:
        print(markdown(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
