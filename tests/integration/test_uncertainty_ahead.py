"""The draws' head start (uncertainty/ahead): the line chains run while the planner waits on
its replay are taken up by the block only for the same fleets, caps and draws, and the block
is the same, byte for byte, however many draws ran ahead."""

from __future__ import annotations

import pytest

from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize
from pdd_plan.uncertainty import Options, ahead, block, split

pytestmark = pytest.mark.integration

DRAWS = 6  # under split.MIN_DRAWS: one process, in draw order


@pytest.fixture(scope="module")
def planned():
    path = profiles.scenario_path(None)
    ctx = build_context(load_scenario(path), path)
    return ctx, optimize(ctx, verify=False)  # no replay: each plan under the scenario's caps


def _after(k: int):
    """A `stop` that lets `k` draws run."""
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > k

    return stop


@pytest.mark.parametrize("k", [0, 1, 3, DRAWS])
def test_the_block_is_the_same_however_many_draws_ran_ahead(planned, monkeypatch, k):
    ctx, plan = planned
    monkeypatch.setattr(split, "can_fork", lambda: False)
    ahead.forget()
    plain = block.assess(ctx, plan, Options(draws=DRAWS)).model_dump_json()
    ran = block.head_start(ctx, plan.plans, Options(draws=DRAWS), _after(k))
    assert ran == k
    taken = []
    real = ahead.adopt
    monkeypatch.setattr(ahead, "adopt", lambda ev, d: taken.append(real(ev, d)) or taken[-1])
    got = block.assess(ctx, plan, Options(draws=DRAWS)).model_dump_json()
    assert got == plain
    assert taken == [k > 0]  # something ran ahead: taken up


def test_chains_run_for_other_draws_or_fleets_are_not_taken(planned, monkeypatch):
    ctx, plan = planned
    monkeypatch.setattr(split, "can_fork", lambda: False)
    plain = block.assess(ctx, plan, Options(draws=DRAWS + 1)).model_dump_json()
    block.head_start(ctx, plan.plans, Options(draws=DRAWS), _after(3))  # other draws
    taken = []
    real = ahead.adopt
    monkeypatch.setattr(ahead, "adopt", lambda ev, d: taken.append(real(ev, d)) or taken[-1])
    assert block.assess(ctx, plan, Options(draws=DRAWS + 1)).model_dump_json() == plain
    # other fleets: IDC-PD alone
    block.head_start(ctx, {"idc_pd": plan.plans["idc_pd"]}, Options(draws=DRAWS + 1), _after(3))
    assert block.assess(ctx, plan, Options(draws=DRAWS + 1)).model_dump_json() == plain
    assert taken == [False, False]
    assert not ahead._KEPT  # each kept run is offered once


def test_no_head_start_for_robust_fleets(planned):
    ctx, plan = planned
    ahead.forget()
    assert block.head_start(ctx, plan.plans, Options(draws=DRAWS, robust=0.9), _after(3)) == 0
    assert not ahead._KEPT
