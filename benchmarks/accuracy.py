"""Accuracy of the perf model: leave-one-source-out, per model family and per GPU.

Usage: ``python -m benchmarks.accuracy [MEASUREMENTS.csv] [--write-band] [--date D]``
(default CSV: the bundled ``pdd_plan/data/calibration/calibration_measurements.csv``, read
with the ``readings.yaml`` beside it).

A *source* is one document (the readings' ``documents``). For each source S, the per-GPU
efficiency factors (mfu, mbu, step overhead, chunk half size: ``perf.calibration.fit``, the
same fit ``pdd-plan calibrate`` runs) are fitted on the rows of every OTHER source, per GPU,
and S's rows are predicted with them. A GPU with no rows outside S takes the pooled estimate
(``perf.pooled.family_pool``: per factor, the row-weighted median of the factors fitted on the
GPUs with training rows of the row's model family). Nothing is tuned on the held-out rows.
Four errors per row, pred / measured - 1:

* held-out: fitted without the row's source (the honest figure);
* held-out, no pool: the same, but a GPU without training rows keeps its analytic profile
  (the method before the pooled estimate, kept for comparison);
* in-sample: fitted on every row (what a fit to all the data reproduces);
* analytic: the GPU profiles as written, no fit.

Rows the readings set aside (serving figures that check ``simulate``, or too little detail)
are listed with their reason. ``--write-band`` writes the held-out band per family to
``pdd_plan/data/calibration/error_band.yaml`` (median, p90 and max abs error, rows, date).
Exit status 1 when the held-out target (median <= 15 %, max <= 35 %) is missed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import yaml

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration import pooled
from pdd_plan.common.atomic import write_atomic

MEDIAN_TARGET = 0.15
MAX_TARGET = 0.35
KINDS = ("held_out", "held_out_analytic", "in_sample", "analytic")


def _fit_all(rows, analytic, cache: dict) -> dict[str, tuple[dict, int]]:
    """Per GPU with rows: its fitted factors and row count (cached by GPU and rows)."""
    out = {}
    for g in sorted({r.gpu for r in rows}):
        mine = [r for r in rows if r.gpu == g]
        key = (g, tuple(r.row for r in mine))
        if key not in cache:
            cache[key] = cal.fit(mine, analytic[g]).factors
        out[g] = (cache[key], len(mine))
    return out


def _profile(r, train, fits, analytic, pool: bool):
    """The profile row `r` is predicted with when fitted on `train`: its GPU's own fit; for a
    GPU without training rows the pooled estimate (`pool`) or the analytic profile."""
    if r.gpu in fits:
        f, n = fits[r.gpu]
        return cal.with_efficiency(
            analytic[r.gpu], **f, mode="calibrated"
        ), f"fitted to {n} row{'s' * (n != 1)}"
    if pool:
        factors, note = pooled.family_pool({g: f for g, (f, _) in fits.items()}, train, r.family)
        if factors:
            return pooled.pooled_profile(analytic[r.gpu], factors), note
    return analytic[r.gpu], "analytic (no training rows)"


def evaluate(rows) -> list[dict]:
    """One dict per row: measured, the predictions of each KIND and their errors, and how the
    held-out profile was made."""
    gpus = sorted({r.gpu for r in rows})
    analytic = {g: cal.analytic_gpu(g) for g in gpus}
    cache: dict = {}
    all_fits = _fit_all(rows, analytic, cache)
    out = []
    for doc in sorted({r.document for r in rows}):
        held = [r for r in rows if r.document == doc]
        train = [r for r in rows if r.document != doc]
        fits = _fit_all(train, analytic, cache)
        for r in held:
            prof, note = _profile(r, train, fits, analytic, pool=True)
            pred = {
                "held_out": cal.predict(r, prof),
                "held_out_analytic": cal.predict(r, _profile(r, train, fits, analytic, False)[0]),
                "in_sample": cal.predict(r, _profile(r, rows, all_fits, analytic, True)[0]),
                "analytic": cal.predict(r, analytic[r.gpu]),
            }
            out.append(
                {
                    "row": r.row,
                    "document": doc,
                    "gpu": r.gpu,
                    "family": r.family,
                    "label": r.label,
                    "measured": r.value,
                    "pred": pred,
                    "err": {k: r.error(v) for k, v in pred.items()},
                    "held_out_fit": note,
                }
            )
    return sorted(out, key=lambda e: e["row"])


def summary(entries: list[dict], kind: str) -> dict:
    e = np.abs([x["err"][kind] for x in entries])
    return {
        "rows": len(e),
        "median_abs_error": float(np.median(e)),
        "p90_abs_error": float(np.percentile(e, 90)),
        "max_abs_error": float(np.max(e)),
    }


def _groups(entries: list[dict]) -> list[tuple[str, list[dict]]]:
    fams = [(f"family {f}", [e for e in entries if e["family"] == f]) for f in ("dense", "moe")]
    gpus = [
        (f"GPU {g}", [e for e in entries if e["gpu"] == g])
        for g in sorted({e["gpu"] for e in entries})
    ]
    return [("all", entries)] + [g for g in fams + gpus if g[1]]


def band_yaml(entries: list[dict], date: str, csv_name: str) -> str:
    band = {}
    for fam in ("dense", "moe"):
        sel = [e for e in entries if e["family"] == fam]
        if sel:
            s = summary(sel, "held_out")
            band[fam] = {k: round(v, 4) if isinstance(v, float) else v for k, v in s.items()}
            band[fam]["date"] = date
    data = {
        "kind": "held-out (leave-one-source-out) abs relative error of perf-model throughput",
        "measurements": csv_name,
        "date": date,
        "source": (
            "written by `python -m benchmarks.accuracy --write-band`: per model family, the "
            "errors of predictions for rows whose source document was left out of the per-GPU "
            "efficiency fit (see BENCHMARKS.md, perf-model accuracy)"
        ),
        "families": band,
    }
    head = "# Generated by benchmarks/accuracy.py --write-band; do not edit by hand.\n"
    return head + yaml.safe_dump(data, sort_keys=False, width=100)


def _print(entries: list[dict], aside) -> None:
    print(
        "| row | source | GPU | run | measured | held-out | err | held-out, no pool | err "
        "| in-sample | err | analytic | err | held-out profile |"
    )
    print("|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for e in entries:
        p, r = e["pred"], e["err"]
        cells = " | ".join(f"{p[k]:,.0f} | {r[k]:+.1%}" for k in KINDS)
        print(
            f"| {e['row']} | {e['document']} | {e['gpu']} | {e['label']} | {e['measured']:,.0f} | "
            f"{cells} | {e['held_out_fit']} |"
        )
    print(
        "\n| rows | n | held-out median | held-out max | no-pool median | no-pool max "
        "| in-sample median | in-sample max | analytic median | analytic max |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, sel in _groups(entries):
        s = {k: summary(sel, k) for k in KINDS}
        cells = " | ".join(
            f"{s[k]['median_abs_error']:.1%} | {s[k]['max_abs_error']:.1%}" for k in KINDS
        )
        print(f"| {name} | {len(sel)} | {cells} |")
    print("\nRows set aside (not instance throughput):\n")
    print("| row | source | metric | value | use | reading |")
    print("|---:|---|---|---:|---|---|")
    for a in aside:
        reason = " ".join(a.reading.split())
        print(f"| {a.row} | {a.document} | {a.metric} | {a.value:,.4g} | {a.use} | {reason} |")


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
    args = ap.parse_args(argv)
    rows, aside = cal.read_rows(args.csv)
    entries = evaluate(rows)
    print(f"## Perf model vs {Path(args.csv).name}: leave-one-source-out\n")
    _print(entries, aside)
    held = summary(entries, "held_out")
    ok = held["median_abs_error"] <= MEDIAN_TARGET and held["max_abs_error"] <= MAX_TARGET
    print(
        f"\nTarget (held-out median <= {MEDIAN_TARGET:.0%}, max <= {MAX_TARGET:.0%}): "
        f"{'met' if ok else 'MISSED'} (median {held['median_abs_error']:.1%}, "
        f"max {held['max_abs_error']:.1%})."
    )
    if args.write_band:
        write_atomic(args.band_path, band_yaml(entries, args.date, Path(args.csv).name))
        print(f"wrote {args.band_path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
