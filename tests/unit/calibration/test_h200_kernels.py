"""The H200 layer timings (benchmarks/h200_layers.py, 2026-12-01) as calibration measurements:
they parse, are read as kernel-only passes, and the shipped h200 factors (fitted to engine
rows only) predict the BF16 prefill passes they never saw."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration import measurements
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import error_band, profiles
from pdd_plan.inputs.calibrated import calibration_dir
from pdd_plan.perf import comm, roofline

pytestmark = pytest.mark.unit

CSV = calibration_dir() / "h200-kernels" / "measurements.csv"
RAW = Path(__file__).resolve().parents[3] / "benchmarks" / "data"


def _rows():
    return measurements.read_measurements(CSV)


def test_every_timing_is_a_kernel_only_row_matching_the_raw_json():
    rows = _rows()
    assert len(rows) == 38 and all(r.kernels_only and r.gpu == "h200" for r in rows)
    raw = [
        r
        for f in ("run2", "run4_extend")
        for r in json.loads((RAW / f"h200_layers_2026-12-01_{f}.json").read_text())["runs"]
    ]
    t = {(r["model"], r["dtype"], r["tokens"], r["context"]): r["pass_s"] for r in raw}
    # tolerance: 3%: each CSV rate is the median of 2 calls up to 3% apart (the notes' spread),
    # rounded to 0.1 tokens/s
    for r in rows:  # tokens/s = tokens of the pass / its seconds (median of two calls)
        n, ctx = (r.isl, r.cached) if r.phase == "prefill" else (r.batch, r.isl)
        s = t[(r.model, r.dtype, n, ctx)]
        assert r.value == pytest.approx(n / s, rel=0.03), r.label


def test_kernels_only_drops_exactly_the_step_overhead():
    gpu = profiles.gpu("h200")
    r = next(m for m in _rows() if m.phase == "decode" and m.batch == 64 and m.dtype == "bf16")
    from dataclasses import replace

    inst = cal.instance_of(r, gpu)
    p = roofline.decode_step(inst, r.batch, r.isl)
    assert cal.predict(r, gpu) == pytest.approx(r.batch / (p.total_s - p.overhead_s))
    assert cal.predict(replace(r, kernels_only=False), gpu) == pytest.approx(r.batch / p.total_s)
    # the overhead a kernel timing drops: the fitted per-pass part and the engine's per-request
    # CPU cost of the batch (neither runs without a serving engine)
    cpu = comm.serving().engine_step.per_request_us * 1e-6 * r.batch
    assert p.overhead_s == pytest.approx(gpu.efficiency.step_overhead_ms / 1e3 + cpu)


def test_bf16_prefill_passes_predicted_within_the_stated_band():
    """Held out: the h200 factors were fitted to engine rows only (jointly with every GPU's
    rows, calibration/joint.py), and these kernel timings are not among the rows the shipped
    error band was measured on. The bar is that band, the accuracy the product states to its
    users (data/calibration/error_band.yaml, dense family): the passes' median absolute error
    within its median, none beyond its P90. (It replaces a fixed bar widened 10% -> 12% -> 16%
    as the model moved; on 2026-12-07 the passes read +0.8 .. +11.6%, median 2.6%, against a
    stated median 4.3% and P90 18.6%: the 256-token pass the most optimistic, torch's unfused
    layer.)"""
    gpu = profiles.gpu("h200")
    pre = [r for r in _rows() if r.dtype == "bf16" and r.phase == "prefill" and not r.cached]
    assert len(pre) == 8
    band, note = error_band.band_for_model(profiles.model("llama-3.1-8b"))
    assert band is not None, note
    err = {r.label: abs(cal.predict(r, gpu) / r.value - 1) for r in pre}
    assert statistics.median(err.values()) <= band["median_abs_error"], err
    for label, e in err.items():
        assert e <= band["p90_abs_error"], (label, e)


def test_small_batch_decode_is_slower_than_the_roofline():
    # what the roofline leaves out below the engine: a decode step at batch 1 runs ~14 small
    # kernels per layer whose fixed latency no byte count sees; the prediction is optimistic
    # there and close at batch 256 (recorded, so a change that hides it is noticed)
    gpu = profiles.gpu("h200")
    dec = {r.batch: r for r in _rows() if r.model == "llama-3.1-8b" and r.dtype == "bf16"
           and r.phase == "decode" and r.isl == 2048}  # fmt: skip
    err = {b: cal.predict(r, gpu) / r.value - 1 for b, r in dec.items()}
    assert err[1] > 0.3 and abs(err[256]) < 0.1
    assert err[1] > err[16] > err[64] > err[256]


def test_kernels_only_offline_reading_is_refused(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "measurements.csv").write_text(
        CSV.read_text().splitlines()[0] + "\n" + CSV.read_text().splitlines()[1] + "\n"
    )
    rd = (CSV.parent / "readings.yaml").read_text()
    head, _, _ = rd.partition("rows:")
    (d / "readings.yaml").write_text(
        head + "rows:\n  1: {use: predict, reading: x, gpu: h200, model: llama-3.1-8b, "
        "phase: offline, isl: 128, osl: 128, kernels_only: true}\n"
    )
    with pytest.raises(InputError, match="kernels_only"):
        measurements.read_measurements(d / "measurements.csv")


def test_extend_rows_carry_the_cached_prefix_into_the_prediction():
    # an extend of 4,096 tokens costs more the longer the cached prefix (attention over it):
    # measured and predicted both grow, and the prediction is the prefill with those tokens cached
    gpu = profiles.gpu("h200")
    ext = sorted(
        (r for r in _rows() if r.model == "llama-3.1-8b" and r.cached and r.isl == 4096),
        key=lambda r: r.cached,
    )
    assert [r.cached for r in ext] == [4096, 16384, 57344]
    meas = [r.value for r in ext]
    pred = [cal.predict(r, gpu) for r in ext]
    assert meas[0] > meas[1] > meas[2] and pred[0] > pred[1] > pred[2]
    inst = cal.instance_of(ext[2], gpu)
    p = roofline.chunk_time(inst, 4096, 57344)
    assert pred[2] == pytest.approx(4096 / (p.total_s - p.overhead_s))


def test_cached_on_a_decode_reading_is_refused(tmp_path):
    from pdd_plan.calibration.readings import Reading

    with pytest.raises(ValueError, match="cached"):
        Reading(use="predict", reading="x", gpu="h200", phase="decode", isl=8, cached=4)
