"""Accuracy of the perf model: leave-one-source-out, per model family, GPU and engine.

Usage: ``python -m benchmarks.accuracy [MEASUREMENTS.csv] [--write-band] [--date D]``
(default CSV: the bundled ``pdd_plan/data/calibration/calibration_measurements.csv``, read
with the ``readings.yaml`` beside it).

A *source* is one document (the readings' ``documents``). For each source S, the efficiency
factors of every GPU and family are fitted jointly (``calibration.joint.fit_joint``, the fit
``pdd-plan calibrate`` runs: per-GPU factors pooled towards the GPUs' mean, and the MoE-vs-dense
shift partially pooled, each GPU with both families deviating from the shared mean under a
prior whose spread the fit estimates from the training rows) on the rows of every OTHER source,
and S's rows are predicted with them; a GPU with no rows outside S takes the population mean
(and the shared mean shift, for MoE). Nothing is tuned on the held-out rows. Three errors per row, + meaning optimistic (predicted /
measured - 1 on a throughput, measured / predicted - 1 on a latency):

* held-out: fitted without the row's source (the honest figure);
* in-sample: fitted on every row (what a fit to all the data reproduces);
* analytic: the GPU profiles as written, no fit.

Each group (family, GPU, engine) shows the median and largest |error| and the mean signed
error (the bias) with the share of rows over-predicted. Rows the readings set aside are listed
with their reason. ``--write-band`` writes the held-out band per family to
``pdd_plan/data/calibration/error_band.yaml`` (median, p90 and max |error|, bias, rows, date).
Exit status 1 when a family misses the held-out target (median <= 15 %, max <= 35 %,
|bias| <= 5 %).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration import joint
from pdd_plan.calibration.measurements import REGIMES
from pdd_plan.common.atomic import write_atomic

MEDIAN_TARGET = 0.15
MAX_TARGET = 0.35
BIAS_TARGET = 0.05
KINDS = ("held_out", "in_sample", "analytic")


def evaluate(rows) -> list[dict]:
    """One dict per row: measured, the predictions of each KIND and their errors (+ means
    optimistic), and how the held-out profile was made."""
    analytic = {g: cal.analytic_gpu(g) for g in sorted({r.gpu for r in rows})}
    everything = joint.fit_joint(rows, analytic)
    out = []
    for doc in sorted({r.document for r in rows}):
        held = [r for r in rows if r.document == doc]
        train = [r for r in rows if r.document != doc]
        jf = joint.fit_joint(train, analytic) if train else None
        for r in held:
            eng = r.engine_name
            prof = jf.profile(analytic[r.gpu], eng) if jf else analytic[r.gpu]
            pred = {
                "held_out": cal.predict(r, prof),
                "in_sample": cal.predict(r, everything.profile(analytic[r.gpu], eng)),
                "analytic": cal.predict(r, analytic[r.gpu]),
            }
            out.append(
                {
                    "row": r.row,
                    "document": doc,
                    "gpu": r.gpu,
                    "family": r.family,
                    "engine": r.engine_name,
                    "regime": r.regime,
                    "label": r.label,
                    "measured": r.value,
                    "latency": r.is_latency,
                    "pred": pred,
                    "err": {k: r.error(v) for k, v in pred.items()},
                    "held_out_fit": jf.basis(r.gpu, r.family) if jf else "analytic (no rows)",
                }
            )
    return sorted(out, key=lambda e: e["row"])


def summary(entries: list[dict], kind: str) -> dict:
    signed = np.array([x["err"][kind] for x in entries])
    e = np.abs(signed)
    return {
        "rows": len(e),
        "median_abs_error": float(np.median(e)),
        "p90_abs_error": float(np.percentile(e, 90)),
        "max_abs_error": float(np.max(e)),
        "mean_signed_error": float(np.mean(signed)),
        "optimistic_share": float(np.mean(signed > 0)),
    }


def _groups(entries: list[dict]) -> list[tuple[str, list[dict]]]:
    def by(key: str, title: str) -> list[tuple[str, list[dict]]]:
        vals = sorted({e[key] for e in entries})
        return [(f"{title} {v}", [e for e in entries if e[key] == v]) for v in vals]

    fams = [(f"family {f}", [e for e in entries if e["family"] == f]) for f in ("dense", "moe")]
    regs = [(f"regime {g}", [e for e in entries if e["regime"] == g]) for g in REGIMES]
    fam_reg = [
        (f"{f} {g}", [e for e in entries if e["family"] == f and e["regime"] == g])
        for f in ("dense", "moe")
        for g in REGIMES
    ]
    groups = fams + regs + fam_reg + by("gpu", "GPU") + by("engine", "engine")
    return [("all", entries)] + [g for g in groups if g[1]]


def _band_entry(sel: list[dict], date: str) -> dict:
    s = summary(sel, "held_out")
    out = {k: round(v, 4) if isinstance(v, float) else v for k, v in s.items()}
    out["bias"] = round(float(np.median([x["err"]["held_out"] for x in sel])), 4)
    out["date"] = date
    return out


def band_yaml(entries: list[dict], date: str, csv_name: str) -> str:
    band, regimes = {}, {}
    for fam in ("dense", "moe"):
        sel = [e for e in entries if e["family"] == fam]
        if sel:
            band[fam] = _band_entry(sel, date)
        for g in REGIMES:
            sub = [e for e in sel if e["regime"] == g]
            if sub:
                regimes.setdefault(fam, {})[g] = _band_entry(sub, date)
    data = {
        "kind": "held-out (leave-one-source-out) relative error of perf-model throughput",
        "measurements": csv_name,
        "date": date,
        "source": (
            "written by `python -m benchmarks.accuracy --write-band`: per model family (and "
            "per family and regime, calibration/measurements.py REGIMES), the errors of "
            "predictions for rows whose source document was left out of the joint efficiency "
            "fit (calibration/joint.py); error = predicted / measured - 1 on a throughput, "
            "measured / predicted - 1 on a latency (+ is optimistic); mean_signed_error is the "
            "mean, bias the median signed error (what plans are centred on: one row cannot "
            "move it; see BENCHMARKS.md, perf-model accuracy)"
        ),
        "families": band,
        "regimes": regimes,
    }
    head = "# Generated by benchmarks/accuracy.py --write-band; do not edit by hand.\n"
    return head + yaml.safe_dump(data, sort_keys=False, width=100)


def _row_table(entries: list[dict]) -> list[str]:
    out = [
        "| row | source | GPU | engine | run | measured | held-out | err | in-sample | err "
        "| analytic | err | held-out factors |",
        "|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for e in entries:
        p, r = e["pred"], e["err"]
        cells = " | ".join(f"{p[k]:,.0f} | {r[k]:+.1%}" for k in KINDS)
        unit = " ms" if e["latency"] else ""
        out.append(
            f"| {e['row']} | {e['document']} | {e['gpu']} | {e['engine']} | {e['label']} | "
            f"{e['measured']:,.0f}{unit} | {cells} | {e['held_out_fit']} |"
        )
    return out


def _group_table(groups: list[tuple[str, list[dict]]]) -> list[str]:
    out = [
        "| rows | n | held-out median | held-out max | held-out bias | median signed | optimistic "
        "| in-sample median | in-sample max | in-sample bias | analytic median | analytic bias |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, sel in groups:
        s = {k: summary(sel, k) for k in KINDS}
        h, i, a = s["held_out"], s["in_sample"], s["analytic"]
        med = float(np.median([x["err"]["held_out"] for x in sel]))
        out.append(
            f"| {name} | {len(sel)} | {h['median_abs_error']:.1%} | {h['max_abs_error']:.1%} | "
            f"{h['mean_signed_error']:+.1%} | {med:+.1%} | {h['optimistic_share']:.0%} | "
            f"{i['median_abs_error']:.1%} | {i['max_abs_error']:.1%} | "
            f"{i['mean_signed_error']:+.1%} | {a['median_abs_error']:.1%} | "
            f"{a['mean_signed_error']:+.1%} |"
        )
    return out


def _aside_table(aside: list[dict]) -> list[str]:
    out = ["| row | source | metric | value | use | reading |", "|---:|---|---|---:|---|---|"]
    for a in aside:
        out.append(
            f"| {a['row']} | {a['document']} | {a['metric']} | {a['value']:,.4g} | {a['use']} "
            f"| {a['reading']} |"
        )
    return out


def _targets_line(entries: list[dict]) -> str:
    ok, lines = _met(entries)
    return (
        f"Target per family (held-out median <= {MEDIAN_TARGET:.0%}, max <= {MAX_TARGET:.0%}, "
        f"|bias| <= {BIAS_TARGET:.0%}): {'met' if ok else 'MISSED'}; " + "; ".join(lines) + "."
    )


def _validation_groups(entries: list[dict]) -> list[tuple[str, list[dict]]]:
    pick = [
        ("all", lambda e: True),
        ("dense", lambda e: e["family"] == "dense"),
        ("MoE", lambda e: e["family"] == "moe"),
        ("TensorRT-LLM", lambda e: e["engine"] == "tensorrt-llm"),
        ("SGLang", lambda e: e["engine"] == "sglang"),
    ]
    groups = [(name, [e for e in entries if f(e)]) for name, f in pick]
    return [g for g in groups if g[1]]


def render(data: dict) -> dict[str, str]:
    """The documents' blocks from a stored result (benchmarks/results/accuracy.json):
    `summary` and `rows` for BENCHMARKS.md, `validation` for docs/validation.md."""
    from benchmarks.results import stamp_line

    entries = data["rows"]
    head = (
        f"{stamp_line(data)} {len(entries)} predicted rows of `{data['csv']}`, "
        f"{len(data['aside'])} set aside."
    )
    return {
        "summary": "\n".join(
            [head, "", *_group_table(_groups(entries)), "", _targets_line(entries)]
        ),
        "rows": "\n".join(
            [
                *_row_table(entries),
                "",
                "Rows set aside (not instance throughput):",
                "",
                *_aside_table(data["aside"]),
            ]
        ),
        "validation": "\n".join(
            [head, "", *_group_table(_validation_groups(entries)), "", _targets_line(entries)]
        ),
    }


def _aside_dicts(aside) -> list[dict]:
    return [
        {
            "row": a.row,
            "document": a.document,
            "metric": a.metric,
            "value": a.value,
            "use": a.use,
            "reading": " ".join(a.reading.split()),
        }
        for a in aside
    ]


def _met(entries: list[dict]) -> tuple[bool, list[str]]:
    """Whether every family meets the held-out targets, with one line per family."""
    ok, lines = True, []
    for fam in ("dense", "moe"):
        sel = [e for e in entries if e["family"] == fam]
        if not sel:
            continue
        h = summary(sel, "held_out")
        good = (
            h["median_abs_error"] <= MEDIAN_TARGET
            and h["max_abs_error"] <= MAX_TARGET
            and abs(h["mean_signed_error"]) <= BIAS_TARGET
        )
        ok &= good
        lines.append(
            f"{fam}: median {h['median_abs_error']:.1%}, max {h['max_abs_error']:.1%}, bias "
            f"{h['mean_signed_error']:+.1%} ({'met' if good else 'MISSED'})"
        )
    return ok, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "csv", nargs="?", default=str(cal.calibration_dir() / "calibration_measurements.csv")
    )
    ap.add_argument(
        "--write-band", action="store_true", help="write data/calibration/error_band.yaml"
    )
    ap.add_argument("--band-path", default=str(cal.calibration_dir() / "error_band.yaml"))
    ap.add_argument("--date", default="2026-11-30")
    ap.add_argument("--json", help="also write every row's predictions and errors here")
    ap.add_argument(
        "--store",
        action="store_true",
        help="store the rows in benchmarks/results/accuracy.json and re-render the documents",
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    from benchmarks import results

    stamp = results.stamp("python -m benchmarks.accuracy --store")
    rows, aside = cal.read_rows(args.csv)
    entries = evaluate(rows)
    if args.json:
        write_atomic(args.json, json.dumps(entries, indent=1))
    data = {
        **stamp,
        "wall_s": round(time.perf_counter() - t0, 1),
        "csv": Path(args.csv).name,
        "rows": entries,
        "aside": _aside_dicts(aside),
    }
    blocks = render(data)
    print(f"## Perf model vs {Path(args.csv).name}: leave-one-source-out\n")
    print(blocks["rows"] + "\n\n" + blocks["summary"])
    ok, _ = _met(entries)
    if args.store:
        from benchmarks import render as docs

        print(f"wrote {results.save('accuracy', data)}")
        docs.main([])
    if args.write_band:
        write_atomic(args.band_path, band_yaml(entries, args.date, Path(args.csv).name))
        print(f"wrote {args.band_path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
