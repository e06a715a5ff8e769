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
DENSE = {"mfu": 0.6, "mbu": 0.8, "step_overhead_ms": 2.0}


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
    # rows: 3 measurements, 3 pooling terms a GPU, 3 for mu, 2 for the shift, 1 for the slope,
    # 1 for TensorRT-LLM's overhead offset (rows 1 and 60; row 90 is SGLang, the reference);
    # columns: h100, h200, mu, the shift, the slope, the offset
    assert s.shape == (3 + 3 * 2 + 3 + 2 + 1 + 1, 3 * 2 + 3 + 2 + 1 + 1)
    assert pb.engines == ["tensorrt-llm"]
    assert s[0, pb.eng0] and s[1, pb.eng0] and not s[2, pb.eng0] and s[-1, pb.eng0]
    assert not s[0, pb.sh].any() and s[1, pb.sh].all()  # row 1 dense, row 60 Mixtral
    assert not s[:3, pb.beta].any() and s[3, pb.beta] and not s[4, pb.beta]  # mfu's pooling
    assert s[0, :3].all() and not s[0, 3:6].any()  # row 1 on h100 (the first GPU)


@pytest.mark.unit
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
    # tolerance: 15%: the partially pooled fit shrinks a shift toward the pooled mean on few rows
    # (biased by design, not exact)
    assert math.exp(jf.shift["mfu"]) == pytest.approx(0.5, rel=0.15)
    assert np.median(np.abs(jf.errors)) < 0.03


@pytest.mark.unit
def test_dersimonian_laird_against_hand_arithmetic():
    # s = (0, 1), v = 1/4 each: w = 4, mean 0.5, Q = 2, sum w - sum w^2 / sum w = 4:
    # tau^2 = (Q - (k - 1)) / 4 = 0.25
    assert joint.dersimonian_laird(np.array([0.0, 1.0]), np.array([0.25, 0.25])) == 0.25
    # a spread the noise explains (Q = 0.02 < k - 1): no between-GPU spread
    assert joint.dersimonian_laird(np.array([0.0, 0.1]), np.array([0.25, 0.25])) == 0.0
    assert joint.dersimonian_laird(np.array([0.3]), np.array([0.1])) == 0.0  # one GPU


@pytest.mark.unit
def test_a_gpu_with_both_families_has_its_own_shift_the_others_the_shared_mean():
    shift = {"mfu": math.log(0.5), "mbu": math.log(0.9)}
    dev = {"h100": {"mfu": math.log(1.2), "mbu": 0.0}}
    counts = {"h100": {"dense": 3, "moe": 2}, "b200": {"moe": 4}}
    tau = {"mfu": 0.3, "mbu": 0.0}
    jf = joint.JointFit({"h100": DENSE, "b200": DENSE}, DENSE, shift, counts, [], [], True, "",
                        dev, tau)  # fmt: skip
    assert jf.factors("h100", "moe")["mfu"] == pytest.approx(0.6 * 0.5 * 1.2)
    assert jf.factors("b200", "moe")["mfu"] == pytest.approx(0.6 * 0.5)  # the shared mean
    assert "its own MoE-vs-dense shift (mfu x0.60" in jf.basis("h100", "moe")
    assert "shrunk toward the shared mean" in jf.basis("h100", "moe")
    assert "shared mean MoE-vs-dense shift (mfu x0.50" in jf.basis("b200", "dense")
    assert "shared mean" in jf.basis("l40s", "moe")


@pytest.mark.unit
def test_two_gpus_with_different_shifts_each_keep_most_of_their_own():
    # rows made by the model with h100's MoE at 0.9x its dense mfu and h200's at 0.2x: the
    # estimated spread is not zero and each GPU's shift stays nearer its own truth than the other's
    rows = [
        r for r in cal.read_measurements(CSV) if r.row in (1, 3, 9, 10, 60, 62, 63, 5, 61, 64, 8)
    ]
    shift = {"mfu": math.log(0.6), "mbu": 0.0}
    dev = {
        "h100": {"mfu": math.log(1.5), "mbu": 0.0},
        "h200": {"mfu": math.log(0.2 / 0.6), "mbu": 0.0},
    }
    truth = joint.JointFit({"h100": DENSE, "h200": DENSE}, DENSE, shift, {}, [], [], True, "", dev)
    analytic = {r.gpu: cal.analytic_gpu(r.gpu) for r in rows}
    made = [
        r.__class__(**{**r.__dict__, "value": cal.predict(r, truth.profile(analytic[r.gpu]))})
        for r in rows
    ]
    jf = joint.fit_joint(made, analytic)
    assert jf.tau["mfu"] > joint.TAU_FLOOR and set(jf.deviation) == {"h100", "h200"}
    h100, h200 = (math.exp(jf.gpu_shift(g)["mfu"]) for g in ("h100", "h200"))
    assert abs(h100 - 0.9) < abs(h100 - 0.2) and abs(h200 - 0.2) < abs(h200 - 0.9)


@pytest.mark.unit
def test_student_t_pooling_is_gaussian_near_the_mean_and_flat_far_out():
    r = np.array([-30.0, -3.0, -1e-4, 0.0, 1e-4, 3.0, 30.0])
    t = joint.student_t_residual(r, nu=4.0)
    # its square is the t density's negative log, nu log(1 + r^2 / nu) (hand: r = 3 -> 4 ln 3.25)
    assert t[5] ** 2 == pytest.approx(4.0 * math.log(3.25))
    assert t[4] == pytest.approx(1e-4, rel=1e-6) and t[3] == 0.0  # ~ r near the mean
    assert np.array_equal(np.sign(t), np.sign(r)) and t[0] == -t[6]
    # far out it grows like sqrt(log r): a GPU ten times as far costs about twice (a Gaussian
    # prior: ten times)
    assert t[6] < 2.2 * t[5]
    # the pull on the mean, d t^2 / d r = 2 r / (1 + r^2 / nu), peaks at r = sqrt(nu) (= 2)
    # and falls beyond: an outlier pulls less than a GPU near the others
    pull = 2 * r / (1 + r * r / 4.0)
    assert abs(pull[6]) < abs(pull[5]) < 2.0


@pytest.mark.unit
def test_balance_by_hand_and_a_gpu_without_rows_takes_the_mean_at_its_balance():
    # H100: 989.4 BF16 TFLOP/s over 3.35 TB/s = 295 FLOP/B; H20: 148 over 4.0 = 37
    h100, h20 = profiles.gpu("h100"), profiles.gpu("h20")
    assert joint.balance(h100) == pytest.approx(math.log(989.4e12 / 3.35e12 / 400), rel=1e-9)
    assert joint.balance(h20) == pytest.approx(math.log(148e12 / 4.0e12 / 400), rel=1e-3)
    jf = joint.JointFit(
        {"h100": DENSE}, {**DENSE, "mfu": 0.4}, {"mfu": 0.0, "mbu": 0.0}, {}, [], [], True, "",
        balance_slope=-0.2,
    )  # fmt: skip
    z = joint.balance(h20)
    assert jf.factors("h20", "dense", z)["mfu"] == pytest.approx(0.4 * math.exp(-0.2 * z))
    assert jf.factors("h100", "dense", z) == DENSE  # a GPU with rows keeps its own
    assert jf.population_at(-10.0)["mfu"] == 1.0  # never above the peak


@pytest.mark.unit
def test_joint_fit_finds_the_balance_slope_of_rows_made_with_one():
    # dense rows of four GPUs made by the model with mfu = 0.4 x e^(-0.4 z): the fitted slope
    # has the truth's sign and about its size, and a GPU held out of the rows is predicted from
    # the mean at its own balance better than from the plain mean
    rows = [r for r in cal.read_measurements(CSV) if r.row in (1, 3, 5, 8, 9, 10, 21, 23, 25, 27)]
    analytic = {g: cal.analytic_gpu(g) for g in {r.gpu for r in rows} | {"h20"}}
    pop = {**DENSE, "mfu": 0.4}
    truth = joint.JointFit({}, pop, {"mfu": 0.0, "mbu": 0.0}, {}, [], [], True, "",
                           balance_slope=-0.4)  # fmt: skip
    made = [
        r.__class__(**{**r.__dict__, "value": cal.predict(r, truth.profile(analytic[r.gpu]))})
        for r in rows
    ]
    assert {r.gpu for r in made} == {"a100-80g", "h100", "h200"}
    jf = joint.fit_joint(made, {g: analytic[g] for g in {r.gpu for r in made}})
    assert jf.balance_slope < 0  # three GPUs with rows pin it weakly: the sign, not the size
    z = joint.balance(analytic["h20"])
    want = truth.population_at(z)["mfu"]
    assert abs(jf.population_at(z)["mfu"] - want) < abs(jf.population["mfu"] - want)


@pytest.mark.unit
def test_population_mean_is_not_extrapolated_beyond_the_informed_balances():
    jf = joint.JointFit({}, {**DENSE, "mfu": 0.4}, {"mfu": 0.0, "mbu": 0.0}, {}, [], [], True, "")
    jf = joint.JointFit(**{**jf.__dict__, "balance_slope": -1.0, "z_range": (-0.5, 0.0)})
    # inside the range the mean moves with the balance; beyond it, the nearest end's
    assert jf.population_at(-0.25)["mfu"] == pytest.approx(0.4 * math.exp(0.25))
    assert jf.population_at(-2.4)["mfu"] == pytest.approx(0.4 * math.exp(0.5))  # H20's z
    assert jf.population_at(1.0)["mfu"] == pytest.approx(0.4)


@pytest.mark.unit
def test_one_row_cannot_drag_a_factor_to_a_bound():
    # H100 dense rows as made by the model with known factors, plus one A100 row whose
    # figure is 4x what its factors give: a GPU with one row stays near the population
    rows = [r for r in cal.read_measurements(CSV) if r.row in (1, 2, 3, 5, 9, 10, 21, 25)]
    truth = _fit({})
    analytic = {r.gpu: cal.analytic_gpu(r.gpu) for r in rows}
    made = []
    for r in rows:
        v = cal.predict(r, truth.profile(analytic[r.gpu]))
        made.append(r.__class__(**{**r.__dict__, "value": v * (4.0 if r.gpu == "a100-80g" else 1)}))
    assert sum(r.gpu == "a100-80g" for r in made) == 1
    jf = joint.fit_joint(made, analytic)
    a100 = jf.factors("a100-80g", "dense")
    mean = jf.population_at(joint.balance(analytic["a100-80g"]))
    # one row: a normal prior a quarter as wide as the population's (SIGMA_GPU x 1 / (1 + 3))
    for k, lg in zip(cal.FACTORS, joint.LOG):
        sd = joint.SIGMA_GPU[cal.FACTORS.index(k)] / 4
        gap = math.log(a100[k] / mean[k]) if lg else a100[k] - mean[k]
        assert abs(gap) < 3 * sd, (k, a100[k], mean[k])
    # the row is left mostly unexplained (-59 % here) rather than absorbed by its factors
    assert jf.errors[[r.gpu for r in made].index("a100-80g")] < -0.3


@pytest.mark.unit
def test_one_far_row_keeps_its_error_instead_of_moving_its_gpus_factors():
    # H100 dense rows made by the model with known factors, one of them 4x off (a reading the
    # model lacks): under the rows' Student-t likelihood the factors stay near the truth and
    # the far row keeps most of its error; a normal likelihood would split it between them
    rows = [r for r in cal.read_measurements(CSV) if r.row in (1, 2, 3, 5, 9, 10, 21)]
    truth = _fit({})
    analytic = {r.gpu: cal.analytic_gpu(r.gpu) for r in rows}
    far = rows[0].row
    made = []
    for r in rows:
        v = cal.predict(r, truth.profile(analytic[r.gpu]))
        made.append(r.__class__(**{**r.__dict__, "value": v * (4.0 if r.row == far else 1.0)}))
    jf = joint.fit_joint(made, analytic)
    got = jf.factors("h100", "dense")
    for k in ("mfu", "mbu"):
        assert abs(math.log(got[k] / DENSE[k])) < 0.15, (k, got[k])
    errs = dict(zip(jf.rows, jf.errors))
    assert abs(errs[far]) > 0.5  # the far row stays far (4x: -75 % if left whole)
    assert np.median([abs(e) for r, e in errs.items() if r != far]) < 0.05
    # the likelihood itself: a row 6 sigma out weighs as a t(4) does, not as a normal
    assert joint.NU_ROW == 4.0
