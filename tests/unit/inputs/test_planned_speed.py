"""The plan stands on the speed band's median: the context's GPU profiles run at the shipped
perf band's median speed factor (measured / predicted = 1 / (1 + bias), read here from the
band file itself), or at a scenario's stated speed band's median; the draws at their median
inputs are then the plan's inputs exactly; a fleet's stated `speed_factor` stays over the perf
model's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdd_plan.evaluate.fleet import deployed_inputs, speed_of
from pdd_plan.inputs import error_band, profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.schema.uncertainty import Uncertainty
from pdd_plan.optimize import problem_of
from pdd_plan.uncertainty import draws, perturb
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pdd-paper.yaml"


def _band_median() -> float:
    moe = yaml.safe_load(error_band.band_path().read_text())["families"]["moe"]
    b = moe["bias"] if moe.get("bias") is not None else moe.get("mean_signed_error") or 0.0
    return 1.0 / (1.0 + b)


def test_the_plan_runs_at_the_bands_median_speed():
    ctx = build_context(load_scenario(EXAMPLE), str(EXAMPLE))
    k = _band_median()
    assert ctx.speed == pytest.approx(k, rel=1e-12)
    raw = profiles.gpu("h100")
    # every pass k times as fast: peak FLOP/s and HBM times k, the per-pass overhead over k
    h = ctx.gpus["h100"]
    assert h.compute.bf16_tflops == pytest.approx(raw.compute.bf16_tflops * k)
    assert h.memory.hbm_tbps == pytest.approx(raw.memory.hbm_tbps * k)
    assert h.efficiency.step_overhead_ms == pytest.approx(raw.efficiency.step_overhead_ms / k)
    assert h.memory.hbm_gb == raw.memory.hbm_gb  # sizes stay
    assert speed_of(h)[1] == pytest.approx(k)
    assert "the plan's speed" in (ctx.speed_note or "") and "error band" in ctx.speed_note


def _with(unc: dict):
    sc = load_scenario(EXAMPLE)
    sc = sc.model_copy(update={"uncertainty": Uncertainty.model_validate(unc)})
    return build_context(sc, str(EXAMPLE))


def _lognormal(median: float) -> dict:
    return {"dist": "lognormal", "median": median, "sigma": 0.1, "source": "test"}


def test_a_stated_speed_band_sets_the_plans_speed():
    both = _with({"inputs": {"prefill_speed": _lognormal(0.9), "decode_speed": _lognormal(0.9)}})
    assert both.speed == pytest.approx(0.9)
    assert speed_of(both.gpus["h200"])[1] == pytest.approx(0.9)
    # prefill and decode at different medians: one GPU profile runs both, so the plan stays
    # at the perf model's speed and says why
    split = _with({"inputs": {"prefill_speed": _lognormal(0.9), "decode_speed": _lognormal(1.1)}})
    assert split.speed == 1.0 and speed_of(split.gpus["h100"])[1] == 1.0
    assert "differ" in split.speed_note
    # a stated prefill band and the shipped band for decode that happen to differ: the same
    one = _with({"inputs": {"prefill_speed": _lognormal(1.3)}})
    assert one.speed == 1.0 and "differ" in one.speed_note


def test_the_draws_median_inputs_are_the_plans():
    ctx = build_context(load_scenario(EXAMPLE), str(EXAMPLE))
    ms, _ = draws.marginals(None, ctx.model, ctx.lines)
    med = draws.draw(ms, 4, 0).at()
    assert med["prefill_speed"] == pytest.approx(ctx.speed)
    pb, cls = problem_of(ctx), build_classes(ctx.class_spec)
    ap = perturb.apply(pb, cls, med)
    assert ap.prefill is pb and ap.decode is pb  # no move: the median is where the plan stands
    slow = perturb.apply(pb, cls, {"prefill_speed": 0.9, "decode_speed": 0.9})
    g = next(iter(slow.prefill.catalog.gpus.values()))
    assert speed_of(g)[1] == pytest.approx(0.9)  # a draw is over the perf model's speed


def test_a_fleets_stated_speed_is_over_the_perf_models():
    ctx = build_context(load_scenario(EXAMPLE), str(EXAMPLE))
    pb, rs = problem_of(ctx), ctx.replay_setup
    pb2, rs2 = deployed_inputs(pb, rs, 0.698)
    assert speed_of(rs2.profiles.gpus["h100"])[1] == pytest.approx(0.698)
    assert speed_of(pb2.catalog.gpus["h100"])[1] == pytest.approx(0.698)
    same, _ = deployed_inputs(pb, rs, 1.0)  # 1, the default: the plan's speed
    assert same is pb
