"""The joint fit of every GPU's and family's efficiency factors (calibration/joint.py) and how
its MoE factors reach the perf model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration import joint
from pdd_plan.inputs import profiles
from pdd_plan.inputs.calibrated import apply_calibration
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import Instance

CSV = cal.calibration_dir() / "calibration_measurements.csv"
DENSE = {"mfu": 0.6, "mbu": 0.8, "step_overhead_ms": 2.0, "chunk_half_tokens": 100.0}


def _fit(counts: dict) -> joint.JointFit:
    shift = {"mfu": math.log(0.5), "mbu": math.log(0.9)}
    pop = {**DENSE, "mfu": 0.4}
    return joint.JointFit({"h100": DENSE}, pop, shift, counts, [], [], True, "")


@pytest.mark.unit
def test_moe_factors_are_the_dense_ones_times_the_shared_shift():
    jf = _fit({"h100": {"dense": 3}})
    moe = jf.factors("h100", "moe")
    assert moe["mfu"] == pytest.approx(0.30) and moe["mbu"] == pytest.approx(0.72)
    assert moe["step_overhead_ms"] == 2.0  # not shifted
    # a GPU without rows: the population mean, shifted for MoE
    assert jf.factors("l40s", "dense")["mfu"] == pytest.approx(0.4)
    assert jf.factors("l40s", "moe")["mfu"] == pytest.approx(0.2)
    # the cap: no family runs above the peak
    assert joint.shifted({**DENSE, "mbu": 0.95}, {"mfu": 0.0, "mbu": 0.5})["mbu"] == 1.0


@pytest.mark.unit
def test_basis_says_which_family_was_fitted_and_which_came_through_the_shift():
    jf = _fit({"h100": {"dense": 3}})
    assert jf.basis("h100", "dense").startswith("fitted to 3 dense rows")
    assert "shared part of the joint fit" in jf.basis("h100", "moe")
    assert "population mean" in jf.basis("l40s", "moe")


@pytest.mark.unit
def test_a_moe_instance_runs_with_the_moe_factors():
    jf = _fit({"h100": {"dense": 3}})
    gpu = jf.profile(cal.analytic_gpu("h100"))
    dense = Instance(profiles.model("llama-3.1-8b"), gpu, 1, tp=1, ep=1)
    moe = Instance(profiles.model("qwen3-30b-a3b"), gpu, 1, tp=1, ep=1)
    assert dense.efficiency.mfu == pytest.approx(0.6) and moe.efficiency.mfu == pytest.approx(0.3)
    # a compute-bound prefill pass of the MoE model slows by the mfu ratio (2x) at most
    slow = roofline.chunk_time(moe, 8192, 0).total_s
    fast = roofline.chunk_time(Instance(moe.model, dense.gpu.model_copy(
        update={"efficiency": dense.gpu.efficiency.model_copy(update={"moe": None})}
    ), 1, tp=1, ep=1), 8192, 0).total_s  # fmt: skip
    assert fast < slow <= 2.0 * fast + 1e-9


@pytest.mark.unit
def test_shipped_files_carry_both_families():
    for g in ("h100", "h200", "b200", "mi300x"):
        e = apply_calibration(cal.analytic_gpu(g)).efficiency
        assert e.mode == "calibrated" and e.moe is not None
        assert e.moe.mfu < e.mfu  # the fitted shift: MoE runs at a lower fraction of peak
    # mi300x has MoE rows only: its dense factors come through the shift
    assert "shared part" in apply_calibration(cal.analytic_gpu("mi300x")).efficiency.source


@pytest.mark.unit
def test_sparsity_a_dense_row_does_not_depend_on_the_shift():
    rows = [r for r in cal.read_measurements(CSV) if r.row in (1, 60, 90)]
    pb = joint._Problem(rows, {r.gpu: cal.analytic_gpu(r.gpu) for r in rows})
    s = pb.sparsity()
    assert s.shape == (3 + 4 * 2 + 4 + 2, 4 * 2 + 4 + 2)  # h100, h200; mu; shift
    assert not s[0, pb.sh].any() and s[1, pb.sh].all()  # row 1 dense, row 60 Mixtral
    assert s[0, :4].all() and not s[0, 4:8].any()  # row 1 on h100 (the first GPU)


@pytest.mark.slow
def test_joint_fit_recovers_a_known_shift():
    # rows made by the model itself with known factors: the fit must find the shift back
    rows = [r for r in cal.read_measurements(CSV) if r.row in (1, 3, 9, 10, 60, 62, 63, 5, 61)]
    truth = _fit({})
    analytic = {r.gpu: cal.analytic_gpu(r.gpu) for r in rows}
    made = [
        r.__class__(**{**r.__dict__, "value": cal.predict(r, truth.profile(analytic[r.gpu]))})
        for r in rows
    ]
    jf = joint.fit_joint(made, analytic)
    assert jf.success
    assert math.exp(jf.shift["mfu"]) == pytest.approx(0.5, rel=0.15)
    assert np.median(np.abs(jf.errors)) < 0.03
