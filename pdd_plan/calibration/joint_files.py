"""The shipped calibration file of one GPU from a joint fit: dense and MoE factors, each with
how it was estimated (calibration/joint.py)."""

from __future__ import annotations

import datetime as _dt
import math

import numpy as np
import yaml

from pdd_plan.calibration.fit import BOUNDS, FACTORS
from pdd_plan.calibration.joint import REFERENCE_ENGINE, JointFit
from pdd_plan.calibration.measurements import engine_build

DIGITS = {"mfu": 4, "mbu": 4, "step_overhead_ms": 3}


def _factors(f: dict[str, float], source: str) -> dict:
    return {**{k: round(f[k], DIGITS[k]) for k in FACTORS}, "source": source}


def deployed_offset(jf: JointFit, gpu: str) -> float:
    """ms a step of the engine build the planner deploys on `gpu` (SGLang; its ROCm build on
    an AMD GPU) against the reference engine's, which the fitted factors are under."""
    return jf.engine_overhead.get(engine_build(REFERENCE_ENGINE, gpu), 0.0)


def _deployed(jf: JointFit, gpu: str, family: str) -> dict[str, float]:
    f = dict(jf.factors(gpu, family))
    f["step_overhead_ms"] = max(0.0, f["step_overhead_ms"] + deployed_offset(jf, gpu))
    return f


def gpu_errors(jf: JointFit, rows_gpu: dict[int, str], gpu: str) -> list[float]:
    """The fitted errors of `gpu`'s rows (rows_gpu: row -> GPU)."""
    return [e for r, e in zip(jf.rows, jf.errors) if rows_gpu[r] == gpu]


def calibration_yaml(
    jf: JointFit, gpu: str, rows_gpu: dict[int, str], csv_name: str, date: str | None = None
) -> str:
    """The text of `data/calibration/<gpu>.yaml` for `gpu` from the joint fit `jf`."""
    date = date or _dt.date.today().isoformat()
    mine = [r for r in jf.rows if rows_gpu[r] == gpu]
    errs = gpu_errors(jf, rows_gpu, gpu)
    shift = ", ".join(f"{k} x{math.exp(v):.3f}" for k, v in jf.shift.items())
    tau = ", ".join(f"{k} {v:.3f}" for k, v in jf.tau.items())
    method = (
        f"fitted by pdd-plan calibrate to {csv_name} ({len(jf.rows)} rows of "
        f"{len(jf.gpus)} GPUs, jointly: calibration/joint.py), {date}; scipy least_squares on "
        f"log errors (each row's under a Student-t likelihood, nu 4) within bounds {', '.join(f'{k} {BOUNDS[k]}' for k in FACTORS)}, per-GPU "
        f"factors pooled towards the GPUs' mean under a Student-t prior (nu 4), that mean's mfu "
        f"moving with the GPU's BF16 FLOPs per HBM byte (slope {jf.balance_slope:.3f} per e-fold), "
        f"the MoE-vs-dense shift partially pooled "
        f"(shared mean {shift}; a GPU with both families deviates from it under a normal prior "
        f"of spread tau, log, {tau or 'not estimated'}, estimated by DerSimonian-Laird)"
    )
    off = deployed_offset(jf, gpu)
    if off:
        build = engine_build(REFERENCE_ENGINE, gpu)
        method += (
            f"; step overhead under {build}, the build of SGLang the planner deploys on this "
            f"GPU: its fitted offset ({off:+.3f} ms a step, fit.engine_overhead_ms) added"
        )
    data = {
        "gpu": gpu,
        "efficiency": _factors(
            _deployed(jf, gpu, "dense"), f"dense models: {jf.basis(gpu, 'dense')}; {method}"
        ),
        "moe": _factors(_deployed(jf, gpu, "moe"), f"MoE models: {jf.basis(gpu, 'moe')}"),
        "fit": {
            "measurements": csv_name,
            "rows": mine,
            "date": date,
            "rows_per_family": dict(sorted(jf.counts.get(gpu, {}).items())),
            "moe_shift_log": {k: round(v, 4) for k, v in jf.shift.items()},
            "moe_shift_deviation_log": {
                k: round(v, 4) for k, v in jf.deviation.get(gpu, {}).items()
            },
            "moe_shift_tau_log": {k: round(v, 4) for k, v in jf.tau.items()},
            "balance_slope_log": round(jf.balance_slope, 4),
            # each engine's step overhead against SGLang's (the factors above; an AMD GPU's
            # include its ROCm build's), ms a step
            "engine_overhead_ms": {k: round(v, 3) for k, v in sorted(jf.engine_overhead.items())},
            "errors_calibrated": [round(e, 4) for e in errs],
            "median_abs_error_calibrated": round(float(np.median(np.abs(errs))), 4)
            if errs
            else None,
        },
    }
    header = "# Written by `pdd-plan calibrate --write`. Applied on top of the analytic\n"
    header += f"# efficiency of profiles/gpus/{gpu}.yaml whenever that profile is loaded.\n"
    return header + yaml.safe_dump(data, sort_keys=False, width=100)
