"""The second calibration: the report's line from its handoff microbenchmark, with `pdd-plan
line calibrate --transfers` (handoff-microbenchmark.csv: 4,649 KB in 185 ms on average and
512.6 ms at worst). The line's capacity is not fitted: it stays the file's 10 Gb/s (the low end
of the report's "typically 10-100 Gbps"), and a 100 Gb/s copy of the same calibrated profile is
evaluated beside it, never chosen by the result.

Where this build has no `line calibrate --transfers`, `calibrate` says so (`Line.message`) and
the study runs on the file's own line, uncalibrated."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from typer.testing import CliRunner

from pdd_plan.calibration.line_transfers import line_time_s, read_transfers
from pdd_plan.cli import line
from pdd_plan.cli.main import app
from pdd_plan.inputs.schema.line import LineSKU

HERE = Path(__file__).resolve().parent
MICROBENCHMARK = HERE / "handoff-microbenchmark.csv"
NAME = "report-line"  # the SKU name the file's fleets lease
GBPS, BESIDE_GBPS = 10.0, 100.0
COST_PER_MONTH = 547.5  # pdd-report.yaml: ~0.3 GPU-A hour, from the report's cost table
# the profile whose fields the fit does not set it keeps (RTT 20 ms, an inter-city route; the
# other tenants' share; slow start after idle; the sender's 24.5 ms copy): each sourced there
BASE = "shared-10g"


@dataclass(frozen=True)
class Line:
    """The calibrated profiles (None: not calibrated, `message` says why)."""

    profile: Path | None
    beside: Path | None  # the same profile at BESIDE_GBPS
    message: str
    fitted: dict | None = None  # the profile's fields, as written
    # the calibrated line's own time for the microbenchmark's transfer (no sender's copy, as
    # measured): warm mean and cold-start worst, beside the measured 185 / 512.6 ms
    fit_mean_s: float | None = None
    fit_worst_s: float | None = None


def as_is() -> Line:
    """The file's own line, not calibrated (a study of a line given in the file)."""
    return Line(None, None, "the file's own line, as given (not calibrated here)")


def available() -> bool:
    """Whether this build's `line calibrate` takes `--transfers`."""
    return "transfers" in inspect.signature(line.calibrate_cmd).parameters


def calibrate(out_dir: Path, csv: Path = MICROBENCHMARK) -> Line:
    """Run `pdd-plan line calibrate --transfers` on the microbenchmark; the profile at 10 Gb/s
    and a copy at 100 Gb/s in `out_dir`."""
    if not available():
        return Line(
            None,
            None,
            "NOT CALIBRATED: this build's `pdd-plan line calibrate` has no --transfers (the "
            "per-transfer line model); the study runs on the file's bundled 10 Gb/s line, whose "
            "one transfer runs at the line's full rate, so every line-dependent figure below "
            "is the pristine line's, not the report's",
        )
    out = out_dir / f"{NAME}.yaml"
    args = [
        "line",
        "calibrate",
        "--transfers",
        str(csv),
        "--name",
        NAME,
        "--base",
        BASE,
        "--gbps",
        str(GBPS),
        "--cost-per-month",
        str(COST_PER_MONTH),
        "--out",
        str(out),
    ]
    r = CliRunner().invoke(app, args)
    if r.exit_code != 0 or not out.exists():
        return Line(None, None, f"NOT CALIBRATED: line calibrate failed: {r.output.strip()}")
    data = yaml.safe_load(out.read_text())
    # the profile's source names the file as given; keep it the same in every checkout
    data["source"] = str(data.get("source", "")).replace(str(csv), csv.name)
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    beside = out_dir / f"{NAME}-{int(BESIDE_GBPS)}g.yaml"
    beside.write_text(yaml.safe_dump({**data, "gbps": BESIDE_GBPS}, sort_keys=False))
    msg = f"calibrated with `pdd-plan line calibrate --transfers {csv.name} --base {BASE}`"
    sku = LineSKU.model_validate(data)
    x = np.array([float(r.bytes) for r in read_transfers(str(csv))])
    mean = float(line_time_s(sku, x)[0])
    worst = float(line_time_s(sku, x, cold=True)[0])
    return Line(out, beside, msg, data, mean, worst)
