"""Apply a GPU's fitted efficiency factors when its profile is loaded.

``pdd-plan calibrate`` (:mod:`pdd_plan.calibration.fit`) fits ``mfu``, ``mbu``
and ``step_overhead_ms`` of every GPU type jointly, per model family, and
writes them to ``data/calibration/<gpu>.yaml`` (``efficiency:`` the dense factors, ``moe:`` the
MoE ones). This module only reads such a file and applies it on top of
the profile's analytic efficiency (:func:`apply_calibration`, called by
:mod:`pdd_plan.inputs.profiles`), so that loading a profile does not need the fitting code, and the
fitting code can load profiles without an import cycle.
"""

from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import Field

from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.gpu import FamilyFactors, GPUProfile
from pdd_plan.inputs.schema.io import load


class CalibratedFactors(Strict):
    mfu: float = Field(gt=0, le=1)
    mbu: float = Field(gt=0, le=1)
    step_overhead_ms: float = Field(ge=0)
    source: str


class CalibrationFile(Strict):
    gpu: str
    efficiency: CalibratedFactors  # dense models' factors (and every model's without `moe`)
    moe: CalibratedFactors | None = None  # MoE models' factors; `source` says how they were had
    fit: dict[str, Any] | None = None  # provenance: rows, errors before/after (informational)


def calibration_dir() -> Path:
    return Path(str(resources.files("pdd_plan") / "data" / "calibration"))


def calibration_path(gpu_name: str) -> Path:
    return calibration_dir() / f"{gpu_name}.yaml"


@lru_cache(maxsize=64)
def _read_calibration(path: str, mtime: float) -> CalibrationFile:
    del mtime  # part of the cache key only: a rewritten file is read again
    return load(CalibrationFile, path)


def load_calibration(gpu_name: str) -> CalibrationFile | None:
    """The calibration file of a GPU type, or None when it has not been calibrated."""
    p = calibration_path(gpu_name)
    if not p.is_file():
        return None
    return _read_calibration(str(p), p.stat().st_mtime)


def with_efficiency(gpu: GPUProfile, **factors: float | str | FamilyFactors | None) -> GPUProfile:
    """``gpu`` with some of its efficiency fields replaced."""
    eff = gpu.efficiency.model_copy(update=factors)
    return gpu.model_copy(update={"efficiency": eff})


def apply_calibration(gpu: GPUProfile) -> GPUProfile:
    """`gpu` with its fitted factors, when a calibration file for its name exists and the
    profile itself is analytic (a profile that says `mode: calibrated` is kept as written)."""
    if gpu.efficiency.mode != "analytic":
        return gpu
    cal = load_calibration(gpu.name)
    if cal is None:
        return gpu
    c, moe = cal.efficiency, cal.moe
    family = None
    if moe is not None:
        family = FamilyFactors(
            mfu=moe.mfu,
            mbu=moe.mbu,
            step_overhead_ms=moe.step_overhead_ms,
            basis=moe.source,
        )
    return with_efficiency(
        gpu,
        mfu=c.mfu,
        mbu=c.mbu,
        step_overhead_ms=c.step_overhead_ms,
        mode="calibrated",
        source=f"{c.source} (on top of the profile's analytic defaults: {gpu.efficiency.source})",
        moe=family,
    )
