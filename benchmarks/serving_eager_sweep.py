"""How the serving rows' held-out error leans on the eager launch cost (engines.yaml eager).

Usage: ``python -m benchmarks.serving_eager_sweep``

The serve phase takes a step with prompt tokens, on an engine that runs it eager, as at least
launches x ``per_launch_us`` (perf/serve_step.py); the figure is a source's (sglang PR 12160),
not fitted, and a host's CPU and engine version move it. This reruns
``benchmarks.serving_loso`` (the same held-out fits, kept across the sweep: the fit does not
read the serve phase) with the figure scaled from 0 (no floor) to 2x, and prints the all-rows
and NVIDIA figures against the target and the TTFT records' median gap at 1-8 requests.
"""

from __future__ import annotations

import sys
from unittest import mock

import numpy as np

from benchmarks import serving_loso as loso
from pdd_plan.perf import engine_limits, serve_engine

SCALES = (0.0, 0.5, 0.75, 1.0, 1.5, 2.0)


def _with_per_launch(us: float):
    f = engine_limits.engines()
    return f.model_copy(update={"eager": f.eager.model_copy(update={"per_launch_us": us})})


def _cell(errs: list[float]) -> str:
    e = np.array(errs)
    return f"{np.median(np.abs(e)):.1%} / {np.mean(e):+.1%}"


def main() -> int:
    base = engine_limits.engines().eager.per_launch_us
    fits: dict = {}
    print(f"Serving rows, leave-one-source-out, with the eager launch cost scaled (the file's: "
          f"{base:g} us a launch)\n")  # fmt: skip
    print("| scale | us a launch | all rows: median / mean | NVIDIA rows | target "
          "| TTFT records at 1-8 requests: median gap |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for k in SCALES:
        files = _with_per_launch(base * k)
        with mock.patch.object(serve_engine, "engines", lambda f=files: f):
            rows, _, noted = loso.evaluate(fits)
        ok = [e for e in rows if e["error"] is not None]
        errs = [e["error"] for e in ok]
        nv = [e["error"] for e in ok if not e["gpu"].startswith("mi")]
        e = np.array(errs)
        met = np.median(np.abs(e)) <= loso.MEDIAN_TARGET and abs(e.mean()) <= loso.BIAS_TARGET
        bands = loso._record_bands([n for n in noted if n["error"] is not None])
        gap = next((b["median_gap_ms"] for b in bands if b["concurrency"][0] == 1), None)
        print(f"| {k:g} | {base * k:.1f} | {_cell(errs)} | {_cell(nv)} | "
              f"{'met' if met else 'missed'} | {gap:+d} ms |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
