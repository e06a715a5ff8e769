"""Accuracy of the perf model against published offline-throughput measurements.

Usage: ``python benchmarks/accuracy.py [MEASUREMENTS.csv]`` (default: the bundled
``pdd_plan/data/calibration/calibration_measurements.csv``).

For every row it predicts the offline output throughput (``perf.offline.offline_throughput``
with the engine the row was measured on) twice: with the GPU profile's analytic efficiency, and
calibrated (the fitted factors in ``data/calibration/<gpu>.yaml``, as loading the profile
applies them; a GPU with rows but no calibration file is fitted in memory). Prints one markdown
table per row and a summary; writes nothing. Exit status 1 when the calibrated target
(median |error| <= 15 %, every row <= 35 %) is missed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pdd_plan import profiles
from pdd_plan.perf import calibration as cal

MEDIAN_TARGET = 0.15
MAX_TARGET = 0.35


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "csv", nargs="?", default=str(cal.calibration_dir() / "calibration_measurements.csv")
    )
    args = ap.parse_args(argv)
    rows = cal.read_measurements(args.csv)
    gpus = sorted({r.gpu for r in rows})
    analytic = {g: cal.analytic_gpu(g) for g in gpus}
    calibrated, how = {}, {}
    for g in gpus:
        loaded = profiles.gpu(g)
        if loaded.efficiency.mode == "calibrated":
            calibrated[g], how[g] = loaded, f"data/calibration/{g}.yaml"
        else:
            res = cal.fit([r for r in rows if r.gpu == g], analytic[g])
            calibrated[g] = cal.with_efficiency(analytic[g], **res.factors, mode="calibrated")
            how[g] = "fitted in memory (no calibration file)"

    print(f"## Perf model vs {Path(args.csv).name}: offline output throughput (tokens/s)\n")
    print("| row | GPU | model | TP | ISL/OSL | measured | analytic | error | calibrated | error |")
    print("|---:|---|---|---:|---|---:|---:|---:|---:|---:|")
    err_a, err_c = [], []
    for r in rows:
        pa = cal.predict(r, analytic[r.gpu])
        pc = cal.predict(r, calibrated[r.gpu])
        ea, ec = pa / r.value - 1.0, pc / r.value - 1.0
        err_a.append(abs(ea))
        err_c.append(abs(ec))
        print(
            f"| {r.row} | {r.gpu} | {r.model} {r.dtype} | {r.tp} | {r.isl}/{r.osl} | "
            f"{r.value:,.0f} | {pa:,.0f} | {ea:+.1%} | {pc:,.0f} | {ec:+.1%} |"
        )
    med_a, max_a = float(np.median(err_a)), float(np.max(err_a))
    med_c, max_c = float(np.median(err_c)), float(np.max(err_c))
    print("\n| predictions | median abs error | max abs error |")
    print("|---|---:|---:|")
    print(f"| analytic | {med_a:.1%} | {max_a:.1%} |")
    print(f"| calibrated | {med_c:.1%} | {max_c:.1%} |")
    print("\n| GPU | mfu | mbu | step_overhead_ms | chunk_half_tokens | mode | from |")
    print("|---|---:|---:|---:|---:|---|---|")
    for g in gpus:
        for label, prof, src in (
            ("analytic", analytic[g], f"profiles/gpus/{g}.yaml"),
            ("calibrated", calibrated[g], how[g]),
        ):
            e = prof.efficiency
            print(
                f"| {g} | {e.mfu:.3f} | {e.mbu:.3f} | {e.step_overhead_ms:.2f} | "
                f"{e.chunk_half_tokens:.0f} | {label} | {src} |"
            )
    ok = med_c <= MEDIAN_TARGET and max_c <= MAX_TARGET
    verdict = "met" if ok else "MISSED"
    print(
        f"\nTarget (calibrated median <= {MEDIAN_TARGET:.0%}, every row <= {MAX_TARGET:.0%}): "
        f"{verdict}."
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
