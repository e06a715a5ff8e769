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
    r = _row(77)  # one request at a time, 1024 in / 1024 out (the blog's ShareGPT table agrees)
    assert (r.isl, r.osl) == (1024, 1024)
    g = cal.analytic_gpu(r.gpu)
    inst = cal.instance_of(r, g)
    by_hand = roofline.chunk_time(inst, 1024, 0).total_s
    by_hand += sum(roofline.decode_step(inst, 1, 1024 + k).total_s for k in range(0, 1024, 64)) * 64
    # tolerance: 5%: the hand sum takes the decode step at every 64th context (a coarse Riemann sum
    # of the per-token steps)
    assert cal.predict(r, g) / 1e3 == pytest.approx(by_hand, rel=0.05)


@pytest.mark.unit
def test_tpot_alone_is_one_decode_step_and_grows_with_the_others_prefills():
    r = _row(130)  # InferenceX, max-concurrency 1: no other request's prefill in its TPOT
    assert r.figure == "tpot_ms" and r.engine.max_batch == 1
    g = cal.analytic_gpu(r.gpu)
    inst = cal.instance_of(r, g)
    step = roofline.decode_step(inst, 1, r.isl + r.osl / 2).total_s * 1e3
    assert cal.predict(r, g) == pytest.approx(step, rel=1e-9)
    per_user = cal.predict(replace(r, figure="user_tokens_per_s"), g)
    assert per_user == pytest.approx(1e3 / step, rel=1e-9)
    # at concurrency 16 the iteration carries 15 others' prefill chunks now and then: slower
    # than the decode step of 16 alone
    busy = replace(r, engine=replace(r.engine, max_batch=16))
    alone16 = roofline.decode_step(inst, 16, r.isl + r.osl / 2).total_s * 1e3
    assert cal.predict(busy, g) > alone16 > step


@pytest.mark.unit
def test_ttft_at_concurrency_one_is_the_prompt_prefill():
    r = replace(_row(158), less_isl=None)  # 7,373 tokens in one 32,768-token chunk
    g = cal.analytic_gpu(r.gpu)
    inst = cal.instance_of(r, g)
    assert r.is_latency
    assert cal.predict(r, g) == pytest.approx(roofline.chunk_time(inst, 7373, 0).total_s * 1e3)


@pytest.mark.unit
def test_a_ttft_less_the_same_runs_shorter_record_is_the_extra_tokens_prefill():
    r = _row(158)  # 314 ms at 7,373 tokens less the same run's 160 ms at 922 (row 130's note)
    assert r.value == pytest.approx(314 - 160) and r.less_isl == 922
    g = cal.analytic_gpu(r.gpu)
    inst = cal.instance_of(r, g)
    by_hand = roofline.chunk_time(inst, 7373, 0).total_s - roofline.chunk_time(inst, 922, 0).total_s
    assert cal.predict(r, g) == pytest.approx(by_hand * 1e3)
    assert 0 < cal.predict(r, g) < cal.predict(replace(r, less_isl=None), g)


@pytest.mark.unit
def test_a_ttft_over_a_length_spread_is_the_mean_of_the_ttfts():
    r = _row(191)  # LongBench v2 medium: 130K mean, read as uniform over 52K-208K
    assert r.isl_range == (52000, 208000)
    g = cal.analytic_gpu(r.gpu)
    inst = cal.instance_of(r, g)
    lens = [52000 + (j + 0.5) * 156000 / 16 for j in range(16)]
    by_hand = sum(roofline.chunk_time(inst, n, 0).total_s for n in lens) / 16 * 1e3
    assert cal.predict(r, g) == pytest.approx(by_hand, rel=1e-9)
    # convex in the length (attention is quadratic): the mean TTFT exceeds the mean prompt's,
    # by about the attention share x the spread's squared coefficient of variation (0.12)
    at_mean = cal.predict(replace(r, isl_range=None), g)
    assert 1.05 < cal.predict(r, g) / at_mean < 1.12


@pytest.mark.unit
def test_a_spread_or_a_difference_off_a_ttft_or_off_its_length_is_refused():
    from pydantic import ValidationError

    from pdd_plan.calibration.readings import Reading

    base = dict(use="predict", reading="x", gpu="h200", phase="prefill", figure="ttft_ms")
    with pytest.raises(ValidationError, match="isl_range and less are for a ttft_ms"):
        Reading(**{**base, "figure": "throughput", "isl": 100, "isl_range": (50, 150)})
    with pytest.raises(ValidationError, match="must hold isl"):
        Reading(**base, isl=100, isl_range=(120, 150))
    with pytest.raises(ValidationError, match="shorter than isl"):
        Reading(**base, isl=100, less={"row": "1", "isl": 200, "value": 5})
    with pytest.raises(ValidationError, match="not both"):
        Reading(**base, isl=100, isl_range=(50, 150), less={"row": "1", "isl": 20, "value": 5})


@pytest.mark.unit
def test_a_latency_figure_on_the_wrong_phase_is_refused():
    from pydantic import ValidationError

    from pdd_plan.calibration.readings import Reading

    with pytest.raises(ValidationError, match="ttft_ms"):
        Reading(use="predict", reading="x", gpu="h200", phase="decode", figure="ttft_ms")
    with pytest.raises(ValidationError, match="tpot_ms"):
        Reading(use="predict", reading="x", gpu="h200", phase="prefill", figure="tpot_ms")


@pytest.mark.unit
def test_a_difference_not_above_its_base_is_a_one_line_error(tmp_path):
    import shutil

    from pdd_plan.common.errors import InputError

    src = CSV
    shutil.copy(src, tmp_path / src.name)
    text = (src.with_name("readings.yaml")).read_text()
    # the same run's 1K record said to take longer than the 8K one: no prefill left to predict
    bad = text.replace(
        "less: {row: '130 (the same run''s 1K record)', isl: 922, value: 160}",
        "less: {row: '130', isl: 922, value: 400}",
    )
    assert bad != text
    (tmp_path / "readings.yaml").write_text(bad)
    with pytest.raises(InputError, match="row 158.*less.value"):
        cal.read_rows(tmp_path / src.name)
