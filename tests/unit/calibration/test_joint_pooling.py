"""How many rows inform each fitted factor (calibration/joint_pooling.py), and that a factor one
row of several informs stays near the GPUs' mean in the joint fit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration import joint
from pdd_plan.calibration.joint_pooling import MIN_ROWS, _at, effective_rows, row_information
from pdd_plan.inputs import profiles

CSV = cal.calibration_dir() / "calibration_measurements.csv"
SIGMAS = (joint.SIGMA_ROW, joint.SIGMA_GPU)
PRIOR = {"mfu": 0.5, "mbu": 0.8, "step_overhead_ms": 2.0}


def _rows(*numbers: int):
    return [r for r in cal.read_measurements(CSV) if r.row in numbers]


def _info(r) -> np.ndarray:
    g = cal.analytic_gpu(r.gpu)
    return row_information(r, g, profiles.model(r.model), PRIOR, SIGMAS, joint.LOG)


@pytest.mark.unit
def test_a_batch_one_row_informs_the_overhead_a_prefill_row_the_mfu():
    (b1,) = _rows(130)  # DeepSeek-R1 on 8xB200 at batch 1: ~7 ms a step, 2 ms of it moves it ~25 %
    (pre,) = _rows(19)  # GB200 prefill of 2,000-token prompts: compute-bound
    i1, ip = _info(b1), _info(pre)
    assert i1[2] == 1.0 and i1[0] < 0.05  # capped at one row; the mfu hardly moves a batch-1 step
    assert ip[0] == 1.0 and ip[2] < 0.01
    # by hand for the batch-1 row: the change of log(TPOT) when the overhead goes 2 -> 4 ms,
    # over SIGMA_ROW, squared (before the cap)
    g = cal.analytic_gpu(b1.gpu)
    lo, hi = (cal.predict(b1, _at(g, {**PRIOR, "step_overhead_ms": v})) for v in (2.0, 4.0))
    assert (math.log(hi / lo) / joint.SIGMA_ROW) ** 2 > 1.0


@pytest.mark.unit
def test_effective_rows_count_every_row_for_mfu_mbu_and_information_for_the_overhead():
    rows = _rows(16, 18, 19, 20, 55, 190)  # GB200's six: one at batch 1
    analytic = {"gb200": cal.analytic_gpu("gb200")}
    models = {r.model: profiles.model(r.model) for r in rows}
    n = effective_rows(rows, analytic, models, PRIOR, SIGMAS, joint.LOG)["gb200"]
    assert n[0] == n[1] == 6.0
    assert 1.0 <= n[2] < joint.FEW_ROWS  # the batch-1 row and a little of the others
    # no row informs it at all: floored, so the prior stays finite
    pre = _rows(19)
    n0 = effective_rows(pre, analytic, models, PRIOR, SIGMAS, joint.LOG)["gb200"]
    assert n0[2] == MIN_ROWS


@pytest.mark.unit
def test_the_pooling_holds_a_factor_few_rows_inform_near_the_mean():
    # GB200's six rows, one at batch 1 (row 190): its mfu and mbu are pooled under the
    # Student-t (six rows), its step overhead under the normal prior narrowed to n / (n + 3)
    rows = _rows(1, 2, 3, 16, 18, 19, 20, 55, 190)
    analytic = {r.gpu: cal.analytic_gpu(r.gpu) for r in rows}
    pb = joint._Problem(rows, analytic)
    i = pb.gpus.index("gb200")
    assert list(pb.few[i]) == [False, False, True]
    models = {r.model: profiles.model(r.model) for r in rows}
    n = effective_rows(rows, analytic, models, PRIOR, SIGMAS, joint.LOG)["gb200"][2]
    assert pb.shrink[i][2] == pytest.approx(n / (n + joint.FEW_ROWS))
    # the overhead's pooling term is the normal one: 1 ms off the mean costs
    # 1 / (SIGMA_GPU x shrink) in the residual, more than the Student-t's would
    x = pb.x0()
    x[joint.NF * i + 2] = x[pb.mu.start + 2] + 1.0
    r = pb.residuals(x)[len(rows) + joint.NF * i + 2]
    assert r == pytest.approx(1.0 / (joint.SIGMA_GPU[2] * pb.shrink[i][2]))
    assert abs(r) > abs(joint.student_t_residual(np.array([1.0 / joint.SIGMA_GPU[2]]), 4.0)[0])


@pytest.mark.unit
def test_no_shipped_factor_sits_at_a_bound_of_the_fit():
    # the shipped calibration files (pdd-plan calibrate --write on the bundled rows): GB200's
    # step overhead sat at 0 while its one batch-1 row set it alone
    from pdd_plan.calibration.fit import factors_at_bound

    files = sorted(cal.calibration_dir().glob("*.yaml"))
    gpus = [
        f.stem
        for f in files
        if f.stem not in ("readings", "serving_rows", "error_band", "serving_band")
    ]
    assert "gb200" in gpus and len(gpus) >= 10
    for g in gpus:
        assert factors_at_bound(profiles.gpu(g).efficiency) == [], g
