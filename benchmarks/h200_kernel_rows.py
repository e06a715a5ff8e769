"""Turn the H200 layer timings (benchmarks/h200_layers.py, its JSON in benchmarks/data/) into a
measurements CSV with its readings, and compare them with the perf model.

    python -m benchmarks.h200_kernel_rows            # the comparison table
    python -m benchmarks.h200_kernel_rows --write    # (re)write the CSV and readings.yaml

The CSV lives in pdd_plan/data/calibration/h200-kernels/ (a readings.yaml beside it, as for the
bundled CSV), so `pdd-plan calibrate pdd_plan/data/calibration/h200-kernels/measurements.csv`
fits the h200 factors to it. Each row is one forward pass of a whole model on one H200 (TP1),
its kernels alone (`kernels_only`: predicted without the step overhead), as tokens/s: prefill,
prompt tokens / pass seconds; decode, batch / step seconds. The figure is the median of the
calls that timed it (two calls on the same machine, 2026-12-01; they agree within 4%; the two
extend calls ran the attention as one masked SDPA call and as two flash calls merged by their
log-sum-exp).

The comparison predicts every row with the shipped h200 factors (fitted by `pdd-plan
calibrate` to the TensorRT-LLM and MLPerf engine rows of the bundled CSV; nothing in it saw
these timings): a held-out check of the roofline's structure below the serving engine.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import yaml

from pdd_plan.calibration import fit, measurements
from pdd_plan.common.atomic import write_atomic
from pdd_plan.inputs import profiles

ROOT = Path(__file__).resolve().parents[1]
RUNS = [ROOT / "benchmarks/data/h200_layers_2026-12-01_run1.json",
        ROOT / "benchmarks/data/h200_layers_2026-12-01_run2.json",
        ROOT / "benchmarks/data/h200_layers_2026-12-01_run4_extend.json",
        ROOT / "benchmarks/data/h200_layers_2026-12-01_run5_extend_merge.json"]  # fmt: skip
OUT = ROOT / "pdd_plan/data/calibration/h200-kernels"
DATA = ROOT / "benchmarks/data"
SOURCE = (
    "measured 2026-12-01 on one NVIDIA H200 SXM (141 GB, driver 580.159.04, 700 W, torch "
    "2.11.0+cu130) by benchmarks/h200_layers.py: random weights, CUDA-graph replay, median of "
    ">= 5 replays and of 2 calls; raw JSON in benchmarks/data/h200_layers_2026-12-01_run*.json"
)
COLUMNS = ["source", "hardware", "n_gpus", "model", "precision", "parallelism", "workload",
           "metric", "value", "unit", "notes"]  # fmt: skip


def timings() -> list[dict]:
    """One record per (model, dtype, phase, tokens, context), the median over the runs."""
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    for path in RUNS:
        for r in json.loads(path.read_text())["runs"]:
            if "error" not in r:
                by_key[(r["model"], r["dtype"], r["phase"], r["tokens"], r["context"])].append(r)
    out = []
    for rs in by_key.values():
        out.append(
            {
                **rs[0],
                "pass_s": statistics.median(r["pass_s"] for r in rs),
                "attention_s": statistics.median(r["attention_s"] for r in rs),
                "calls": len(rs),
                "spread": max(r["pass_s"] for r in rs) / min(r["pass_s"] for r in rs) - 1,
            }
        )
    return out


def _row(r: dict) -> tuple[dict, dict]:
    pre = r["phase"] in ("prefill", "extend")
    n, ctx = r["tokens"], r["context"]
    value = n / r["pass_s"]
    if r["phase"] == "extend":
        what = f"extend of {n} new tokens on {ctx} cached, one pass"
    elif pre:
        what = f"prefill of one {n}-token prompt, empty cache, one pass"
    else:
        what = f"decode step of {n} requests at context {ctx}"
    csv_row = {
        "source": SOURCE,
        "hardware": "H200 SXM 141GB",
        "n_gpus": 1,
        "model": r["model"],
        "precision": {"bf16": "BF16", "fp8": "FP8 weights (per-tensor), BF16 KV"}[r["dtype"]],
        "parallelism": "TP1; kernels only (no serving engine)",
        "workload": what,
        "metric": "prompt tokens/s of the pass" if pre else "output tokens/s of the step",
        "value": f"{value:.1f}",
        "unit": "tokens/s (one GPU)",
        "notes": (
            f"pass {r['pass_s'] * 1e3:.3f} ms (attention kernels {r['attention_s'] * 1e3:.3f} ms), "
            f"{r['layers']} layers + LM head; {r['calls']} call(s), spread {r['spread']:.1%}; "
            f"timing {r['timing']}"
        ),
    }
    reading = {
        "use": "predict",
        "reading": f"{what}; the pass's kernels alone (TP1, {r['dtype']} weights, BF16 KV)",
        "gpu": "h200",
        "model": r["model"],
        "n_gpus": 1,
        "tp": 1,
        "dtype": r["dtype"],
        "kv_dtype": "bf16",
        "phase": "prefill" if pre else "decode",
        "isl": n if pre else ctx,
        "batch": 1 if pre else n,
        "kernels_only": True,
    }
    if pre:
        reading["chunk"] = n
    if r["phase"] == "extend":
        reading["cached"] = ctx
    return csv_row, reading


def write() -> Path:
    recs = sorted(
        timings(), key=lambda r: (r["model"], r["dtype"], r["phase"], r["tokens"], r["context"])
    )
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    readings = {}
    for i, r in enumerate(recs, start=1):
        row, rd = _row(r)
        w.writerow(row)
        readings[i] = rd
    OUT.mkdir(parents=True, exist_ok=True)
    write_atomic(OUT / "measurements.csv", buf.getvalue())
    head = (
        "# How each row of measurements.csv is read (written by benchmarks/h200_kernel_rows.py).\n"
        "# Every row: one forward pass of the whole model on one H200, TP1, kernels only.\n"
    )
    doc = {
        "csv": "measurements.csv",
        "date": "2026-12-01",
        "documents": {"h200-layer-timings": "benchmarks/h200_layers.py"},
        "rows": readings,
    }
    write_atomic(OUT / "readings.yaml", head + yaml.safe_dump(doc, sort_keys=False, width=100))
    return OUT / "measurements.csv"


def compare(path: Path) -> list[tuple]:
    gpu = profiles.gpu("h200")  # the shipped calibration applies on load
    rows = measurements.read_measurements(path)
    out = []
    for m in rows:
        pred = fit.predict(m, gpu)
        out.append((m, pred, pred / m.value - 1))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the CSV and readings.yaml")
    args = ap.parse_args()
    path = write() if args.write else OUT / "measurements.csv"
    res = compare(path)
    print("| model | dtype | pass | measured tok/s | predicted | error |")
    print("|---|---|---|---|---|---|")
    for m, pred, err in res:
        what = f"prefill {m.isl}" if m.phase == "prefill" else f"decode b{m.batch} @{m.isl}"
        what += f" on {m.cached} cached" if m.cached else ""
        print(f"| {m.model} | {m.dtype} | {what} | {m.value:,.0f} | {pred:,.0f} | {err:+.0%} |")
    for label, keep in (
        ("all", lambda m: True),
        ("bf16 prefill", lambda m: m.dtype == "bf16" and m.phase == "prefill" and not m.cached),
        ("extend (prefill on a cached prefix)", lambda m: m.cached > 0),
        ("bf16 decode", lambda m: m.dtype == "bf16" and m.phase == "decode"),
        ("fp8 prefill", lambda m: m.dtype == "fp8" and m.phase == "prefill" and not m.cached),
        ("fp8 decode", lambda m: m.dtype == "fp8" and m.phase == "decode"),
    ):
        e = [abs(err) for m, _, err in res if keep(m)]
        print(
            f"{label}: {len(e)} rows, median |error| {statistics.median(e):.1%}, max {max(e):.1%}"
        )
    print(f"\n{SPLIT_TABLE}")
    print(split_kv_table())
    return 0


SPLIT_TABLE = "| decode step | plain SDPA ms (attention) | split-KV ms (attention) |"


def split_kv_table() -> str:
    """The negative control: each decode step of the split-KV call (FlashDecoding, partial
    attentions merged by their log-sum-exp) beside the same step of the plain call made in the
    same session just before it (run 2), pass and attention milliseconds as measured."""

    def decode(name: str) -> dict[tuple, dict]:
        runs = json.loads((DATA / f"h200_layers_2026-12-01_{name}.json").read_text())["runs"]
        return {
            (r["model"], r["dtype"], r["batch"], r["context"]): r
            for r in runs
            if r.get("phase") == "decode" and "error" not in r
        }

    plain, split = decode("run2"), decode("run3_split")
    lines = ["|---|---|---|"]
    for k, s in split.items():
        p = plain[k]
        lines.append(
            f"| {k[0]} {k[1]} b{k[2]} @{k[3]} | {p['pass_s'] * 1e3:.2f} "
            f"({p['attention_s'] * 1e3:.2f}) | {s['pass_s'] * 1e3:.2f} ({s['attention_s'] * 1e3:.2f}) |"
        )
    return "\n".join(lines)


def render(data: dict) -> dict[str, str]:
    """The stored output's two blocks: the comparison with the model, and the split-KV table."""
    from benchmarks.results import stamp_line

    main, _, split = data["output"].partition(f"\n{SPLIT_TABLE}\n")
    return {
        "output": f"{stamp_line(data)}\n\n{main.strip()}",
        "split_kv": f"{SPLIT_TABLE}\n{split}",
    }


if __name__ == "__main__":
    sys.exit(main())
