"""The serve phase's held-out band (data/calibration/serving_band.yaml, written by
benchmarks/serving_loso.py --write-band): read, worded for a load by its concurrency band, absent
or malformed said in one line."""

from __future__ import annotations

import pytest
import yaml

from pdd_plan.calibration.serving_rows import load_serving_rows
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import serving_band as sb

pytestmark = pytest.mark.unit

BAND = {
    "kind": "held-out",
    "rows_file": "serving_rows.yaml",
    "date": "2026-12-07",
    "source": "test",
    "figures": {
        "throughput": {
            "rows": 5,
            "median_abs_error": 0.1,
            "mean_signed_error": 0.08,
            "max_abs_error": 0.3,
        },
        "ttft": {
            "rows": 2,
            "median_abs_error": 0.5,
            "mean_signed_error": 0.5,
            "max_abs_error": 0.9,
        },
    },
    "ttft_records": [
        {"concurrency": [1, 8], "records": 3, "median_gap_ms": 120.0, "median_ratio": 3.0},
        {"concurrency": [9, 32], "records": 2, "median_gap_ms": 180.0, "median_ratio": 2.3},
        {"concurrency": [33, None], "records": 4, "median_gap_ms": 600.0, "median_ratio": 2.9},
    ],
}


def _write(tmp_path, data) -> object:
    p = tmp_path / "serving_band.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


@pytest.mark.parametrize(
    "in_flight, gap",
    [(1.0, "+120 ms"), (8.4, "+120 ms"), (8.6, "+180 ms"), (32.0, "+180 ms"), (500.0, "+600 ms")],
)
def test_the_load_picks_its_concurrency_band(tmp_path, in_flight, gap):
    band, note = sb.note_for(in_flight, _write(tmp_path, BAND))
    assert gap in note and "throughput median 10% (mean signed +8%, 5 rows)" in note
    assert "TPOT" not in note  # a figure the file lacks is not made up
    lo = band["ttft_records_here"]["concurrency"][0]
    assert lo == (1 if in_flight < 8.5 else 9 if in_flight <= 32 else 33)


def test_without_the_file_there_is_no_band(tmp_path):
    band, note = sb.note_for(4.0, tmp_path / "absent.yaml")
    assert band is None and "not there" in note and "--write-band" in note


@pytest.mark.parametrize(
    "change",
    [
        {"figures": {"latency": BAND["figures"]["ttft"]}},  # not a figure the band knows
        {"ttft_records": [{**BAND["ttft_records"][0], "median_ratio": -1.0}]},
        {"date": None},
    ],
)
def test_a_malformed_band_is_one_line(tmp_path, change):
    with pytest.raises(InputError) as e:
        sb.note_for(4.0, _write(tmp_path, {**BAND, **change}))
    msg = str(e.value)
    assert "serving_band.yaml" in msg and "\n" not in msg


def test_the_shipped_band_counts_every_record():
    """Its TTFT bands hold each record of serving_rows.yaml once (46 = 19 + 12 + 15 when
    written), and its figures are the serving rows' (66 predicted)."""
    band = sb.load_band()
    assert band is not None
    assert sum(b.records for b in band.ttft_records) == len(load_serving_rows().noted_ttft_ms)
    rows = load_serving_rows().rows
    assert sum(f.rows for f in band.figures.values()) == len(rows) - 1  # row 146 does not fit
    tops = [b.concurrency for b in band.ttft_records]
    assert tops[0][0] == 1 and tops[-1][1] is None  # every load has a band
    assert all(a[1] + 1 == b[0] for a, b in zip(tops, tops[1:]))  # contiguous
    noted = {rows[k].model for k in load_serving_rows().noted_ttft_ms}
    assert {m for b in band.ttft_records for m in b.models} == noted  # the note names them
