"""The decode step a plan actually runs at (issue 13): its first token and TPOT come one step
at the batch Little's law gives, B = x step(B) for an instance decoding x tokens/s, not at the
TPOT-target batch the tables size decode with."""

from __future__ import annotations

import pytest

from pdd_plan.inputs import profiles
from pdd_plan.optimize.summary import _little_step
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import Instance

CTX = 66_000.0


def _inst() -> Instance:
    return Instance(
        profiles.model("deepseek-v4-pro"), profiles.gpu("h200"), 16, tp=16, ep=16, dp=16
    )


def _step(inst: Instance, b: float) -> float:
    return roofline.decode_step(inst, b, CTX).total_s


@pytest.mark.unit
@pytest.mark.parametrize("x", [500.0, 5_000.0, 19_366.0])
def test_the_batch_holds_littles_law(x):
    inst = _inst()
    s = _little_step(inst, x, 4_000.0, CTX)
    b = x * s  # requests in flight: tokens/s x seconds per token
    assert 1.0 <= b <= 4_000.0
    assert _step(inst, b) == pytest.approx(s, rel=1e-6)


@pytest.mark.unit
def test_ends_are_one_request_and_the_full_batch():
    inst = _inst()
    # fewer tokens/s than one request alone makes: a batch of one
    assert _little_step(inst, 0.5 / _step(inst, 1.0), 4_000.0, CTX) == _step(inst, 1.0)
    # exactly the full batch's rate: its step (the tables' design step)
    full = 2_000.0
    x = full / _step(inst, full)
    assert _little_step(inst, x, full, CTX) == pytest.approx(_step(inst, full), rel=1e-6)


@pytest.mark.unit
def test_a_lighter_load_runs_a_shorter_step_than_its_utilization_share():
    # u x bmax overstates the batch: the step at that batch is longer than Little's law's
    inst = _inst()
    full = 2_000.0
    cap = full / _step(inst, full)
    u = 0.3
    s = _little_step(inst, u * cap, full, CTX)
    assert _step(inst, 1.0) < s < _step(inst, u * full) < _step(inst, full)
