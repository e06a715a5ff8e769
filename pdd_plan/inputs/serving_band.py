"""How far off `perf --phase serve` is on published serving runs it was not fitted to.

`benchmarks/serving_loso.py --write-band` writes `data/calibration/serving_band.yaml`: the
leave-one-source-out errors of the serve phase per figure (throughput, TPOT, TTFT) over the
serving rows, and the gap between the mean TTFT published records state and the serve phase's,
per concurrency band. This module only reads that file and words it for one load
(:func:`note_for`); without the file there is no band and the note says so.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import NonNegativeFloat, PositiveFloat, PositiveInt

from pdd_plan.inputs.calibrated import calibration_dir
from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.io import load

Figure = Literal["throughput", "tpot", "ttft"]
LABELS: tuple[tuple[Figure, str], ...] = (
    ("throughput", "throughput"),
    ("tpot", "TPOT"),
    ("ttft", "TTFT"),
)


class FigureBand(Strict):
    rows: PositiveInt
    median_abs_error: NonNegativeFloat
    mean_signed_error: float  # + is optimistic
    max_abs_error: NonNegativeFloat


class RecordBand(Strict):
    concurrency: tuple[PositiveInt, PositiveInt | None]  # inclusive; None: no top
    records: PositiveInt
    median_gap_ms: float  # record's TTFT less the serve phase's
    median_ratio: PositiveFloat
    models: list[str] = []  # the records' models and GPUs: the band speaks for them
    gpus: list[str] = []


class ServingBand(Strict):
    kind: str
    rows_file: str
    date: str
    source: str
    figures: dict[Figure, FigureBand]
    ttft_records: list[RecordBand] = []


def band_path() -> Path:
    return calibration_dir() / "serving_band.yaml"


@lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int) -> ServingBand:
    return load(ServingBand, path)


def load_band(path: Path | None = None) -> ServingBand | None:
    p = Path(path) if path is not None else band_path()
    if not p.is_file():
        return None
    return _load(str(p), p.stat().st_mtime_ns)


def _record_band(band: ServingBand, in_flight: float) -> RecordBand | None:
    c = max(round(in_flight), 1)
    for b in band.ttft_records:
        lo, hi = b.concurrency
        if lo <= c and (hi is None or c <= hi):
            return b
    return None


def note_for(in_flight: float, path: Path | None = None) -> tuple[dict[str, Any] | None, str]:
    """(the band as a dict, or None; one sentence on it) for a load with `in_flight` requests
    in flight on average (its TTFT records' concurrency band)."""
    band = load_band(path)
    if band is None:
        return None, (
            "no serving band: data/calibration/serving_band.yaml is not there "
            "(benchmarks/serving_loso.py --write-band writes it)"
        )
    parts = []
    for name, label in LABELS:
        f = band.figures.get(name)
        if f is not None:
            parts.append(
                f"{label} median {f.median_abs_error:.0%} (mean signed {f.mean_signed_error:+.0%},"
                f" {f.rows} rows)"
            )
    note = (
        "held out on published serving runs (leave-one-source-out; + = optimistic): "
        + ", ".join(parts)
    )
    rec = _record_band(band, in_flight)
    if rec is not None:
        lo, hi = rec.concurrency
        where = f"{lo}-{hi}" if hi is not None else f"{lo}+"
        on = f" of {', '.join(rec.models)}" if rec.models else ""
        note += (
            f"; at {where} requests published records{on} state a mean TTFT above this phase's "
            f"by a median {rec.median_gap_ms:+.0f} ms ({rec.median_ratio:.1f}x, {rec.records} "
            "records)"
        )
    out = band.model_dump(mode="json")
    out["ttft_records_here"] = None if rec is None else rec.model_dump(mode="json")
    return out, note + f" ({band.date})"
