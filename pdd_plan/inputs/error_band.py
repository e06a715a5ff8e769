"""How far off the perf model is, per model family, on measurements it was not fitted to.

`benchmarks/accuracy.py --write-band` writes `data/calibration/error_band.yaml`: for each family
(`dense`, `moe`) the median, 90th-percentile and largest absolute relative error of predicted
against measured throughput, over rows held out of the fit (leave-one-source-out: each source
document is predicted by factors fitted without it), with the row count and the date. This
module only reads that file and picks the band of a model's family, for `perf` and, later, the
optimizer's report (:func:`band_for_model`). Without the file there is no band: the result says
`null` and why, and no number is made up.

Layout read (family keys either under `families:` or at the top level):

    basis: leave-one-source-out
    date: '2026-11-30'
    families:
      dense: {median_abs_error: 0.07, p90_abs_error: 0.15, max_abs_error: 0.22, rows: 14,
              mean_signed_error: -0.02}
      moe:   {median_abs_error: 0.11, p90_abs_error: 0.25, max_abs_error: 0.31, rows: 14,
              mean_signed_error: 0.04}

`mean_signed_error` (+ meaning the model over-predicts throughput) and `bias` (the median
signed error, what plans are centred on: robust to one row) are optional. A `regimes:` section
gives the same fields per family and regime (calibration/measurements.py REGIMES);
:func:`band_for_model` picks the regime's band when it has at least MIN_REGIME_ROWS rows.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.calibrated import calibration_dir
from pdd_plan.inputs.schema.io import read_yaml
from pdd_plan.inputs.schema.model import ModelProfile

FAMILIES = ("dense", "moe")
MIN_REGIME_ROWS = 3  # fewer held-out rows in a regime: the family's band speaks for it
BASIS = "leave-one-source-out"
# field in the band -> names the file may use for it
KEYS = {
    "median_abs_error": ("median_abs_error", "median"),
    "p90_abs_error": ("p90_abs_error", "p90"),
    "max_abs_error": ("max_abs_error", "max"),
}


def band_path() -> Path:
    return calibration_dir() / "error_band.yaml"


def family(model: ModelProfile) -> str:
    """`moe` for a mixture-of-experts model, else `dense`."""
    return "moe" if model.ffn.moe is not None else "dense"


def _fraction(entry: dict[str, Any], field: str, file: str, fam: str) -> float | None:
    for key in KEYS[field]:
        if key in entry:
            v = entry[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 10:
                raise InputError(
                    file, f"{fam}.{key}", f"not an error fraction: {v!r}", "e.g. 0.12 for 12 %"
                )
            return float(v)
    return None


def _bias(
    entry: dict[str, Any], file: str, fam: str, key: str = "mean_signed_error"
) -> float | None:
    """A signed error (+: the model over-predicts throughput), when the file has it."""
    v = entry.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not -10 < v < 10:
        raise InputError(file, f"{fam}.{key}", f"not an error fraction: {v!r}", "e.g. -0.03")
    return float(v)


def _rows(entry: dict[str, Any], file: str, fam: str) -> int:
    v = entry.get("rows")
    if isinstance(v, list):
        return len(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(file, f"{fam}.rows", f"not a row count: {v!r}", "the held-out rows")
    return v


def _band(entry: Any, file: str, where: str, fam: str, data: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise InputError(file, where, "not a mapping", "median_abs_error, max_abs_error, rows")
    band: dict[str, Any] = {"family": fam}
    for field in KEYS:
        band[field] = _fraction(entry, field, file, where)
    for need in ("median_abs_error", "max_abs_error"):
        if band[need] is None:
            raise InputError(file, f"{where}.{need}", "missing", "write it with the benchmark")
    band["mean_signed_error"] = _bias(entry, file, where)
    band["bias"] = _bias(entry, file, where, "bias")
    band["rows"] = _rows(entry, file, where)
    band["basis"] = str(data.get("basis", BASIS))
    if "date" in data:
        band["date"] = str(data["date"])
    return band


def parse_bands(data: Any, file: str) -> dict[str, dict[str, Any]]:
    """family -> band (and, under the key `regimes`, family -> regime -> band), from the YAML
    document of an error-band file."""
    if not isinstance(data, dict):
        raise InputError(file, None, "not a mapping", "see pdd_plan/inputs/error_band.py")
    fams = data.get("families", data)
    if not isinstance(fams, dict):
        raise InputError(file, "families", "not a mapping", "family -> band")
    out: dict[str, Any] = {}
    for fam in FAMILIES:
        if fams.get(fam) is not None:
            out[fam] = _band(fams[fam], file, fam, fam, data)
    regs = data.get("regimes") or {}
    if not isinstance(regs, dict):
        raise InputError(file, "regimes", "not a mapping", "family -> regime -> band")
    out["regimes"] = {}
    for fam, by in regs.items():
        if fam not in FAMILIES or not isinstance(by, dict):
            raise InputError(file, f"regimes.{fam}", "not a family's mapping", "dense | moe")
        out["regimes"][fam] = {
            g: {**_band(e, file, f"regimes.{fam}.{g}", fam, data), "regime": g}
            for g, e in by.items()
        }
    return out


@lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int) -> dict[str, dict[str, Any]]:
    # the inputs' YAML reader, as the calibration files': libyaml where installed (~1 ms here
    # against ~7 ms for PyYAML's pure-Python loader: every plan reads the band), the size
    # limit, duplicate keys refused, one-line errors naming the file
    return parse_bands(read_yaml(path), path)


def load_bands(path: Path | None = None) -> dict[str, dict[str, Any]] | None:
    """family -> band from the error-band file, or None when there is no file."""
    p = Path(path) if path is not None else band_path()
    if not p.is_file():
        return None
    return _load(str(p), p.stat().st_mtime_ns)


def band_for_model(
    model: ModelProfile, path: Path | None = None, regime: str | None = None
) -> tuple[dict[str, Any] | None, str]:
    """(band of the model's family, or of its `regime` where that has MIN_REGIME_ROWS held-out
    rows, or None; a note saying where it comes from or why none)."""
    fam = family(model)
    bands = load_bands(path)
    if bands is None:
        return None, (
            "no error band: data/calibration/error_band.yaml is not there "
            "(benchmarks/accuracy.py --write-band writes it)"
        )
    band = bands.get(fam)
    if band is None:
        return None, f"no error band for {fam} models in the error-band file"
    reg = bands.get("regimes", {}).get(fam, {}).get(regime) if regime else None
    if reg is not None and reg["rows"] >= MIN_REGIME_ROWS:
        band = reg
    what = f"{fam} models" + (f", {band['regime']}" if "regime" in band else "")
    mean, mid = band.get("mean_signed_error"), band.get("bias")
    lean = "" if mean is None else f", mean signed error {mean:+.0%}"
    lean += "" if mid is None else f", median signed {mid:+.0%}"
    lean += " (+: optimistic)" if lean else ""
    note = (
        f"{what}: predictions missed measurements they were not fitted to by a median "
        f"{band['median_abs_error']:.0%}, at most {band['max_abs_error']:.0%}{lean} "
        f"({band['rows']} rows, {band['basis']})"
    )
    return dict(band), note
