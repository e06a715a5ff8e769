"""What a measurement row's figure means: the sign of its error, total vs output tokens, a
request's latency."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pdd_plan.calibration import fit as cal
from pdd_plan.perf import roofline

CSV = cal.calibration_dir() / "calibration_measurements.csv"


def _row(n: int):
    return next(r for r in cal.read_measurements(CSV) if r.row == n)


@pytest.mark.unit
def test_error_is_positive_when_optimistic_for_throughput_and_latency():
    thr = _row(90)  # a throughput row
    assert thr.error(thr.value * 1.5) == pytest.approx(0.5)
    lat = _row(77)  # a latency row: a shorter predicted latency is optimistic
    assert lat.is_latency and lat.error(lat.value / 2.0) == pytest.approx(1.0)


@pytest.mark.unit
def test_total_throughput_counts_input_and_output_tokens():
    r = _row(92)  # InferenceX, ISL 8192 / OSL 1024, (input + output) tokens/s per GPU
    g = cal.analytic_gpu(r.gpu)
    out = cal.predict(replace(r, figure="throughput"), g)
    assert cal.predict(r, g) == pytest.approx(out * (8192 + 1024) / 1024)


@pytest.mark.unit
def test_request_latency_alone_is_a_prefill_then_one_decode_step_per_token():
    r = _row(77)  # one request at a time, 512 in / 512 out (the mean of bench_serving's draw)
    assert (r.isl, r.osl) == (512, 512)
    g = cal.analytic_gpu(r.gpu)
    inst = cal.instance_of(r, g)
    by_hand = roofline.chunk_time(inst, 512, 0).total_s
    by_hand += sum(roofline.decode_step(inst, 1, 512 + k).total_s for k in range(0, 512, 64)) * 64
    assert cal.predict(r, g) / 1e3 == pytest.approx(by_hand, rel=0.05)
