"""The draws' evaluation shared with a forked child (uncertainty/split) gives the uncertainty
block of one process, byte for byte; a failed child leaves the work to this process; a fleet
the child sized is taken only from the start this process would search from."""

from __future__ import annotations

import warnings

import pytest

from pdd_plan.evaluate import fleet
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize
from pdd_plan.uncertainty import Options, block, paired, split
from pdd_plan.workload.classes import build_classes

pytestmark = pytest.mark.integration

DRAWS = 8  # split.MIN_DRAWS: the fewest the child takes


@pytest.fixture(scope="module")
def planned():
    path = profiles.scenario_path(None)
    ctx = build_context(load_scenario(path), path)
    return ctx, optimize(ctx, verify=False)


def _block(ctx, plan, monkeypatch, fork: bool) -> tuple[str, list]:
    started = []
    real = split.start

    def counted(*a, **k):
        p = real(*a, **k)
        started.append(p)
        return p

    monkeypatch.setattr(split, "can_fork", lambda: fork)  # a test worker has threads
    monkeypatch.setattr(split, "start", counted)
    with warnings.catch_warnings():  # fork with execnet's thread alive
        warnings.simplefilter("ignore", DeprecationWarning)
        u = block.assess(ctx, plan, Options(draws=DRAWS))
    return u.model_dump_json(), started


def test_the_child_gives_the_block_of_one_process(planned, monkeypatch):
    ctx, plan = planned
    one, started = _block(ctx, plan, monkeypatch, fork=False)
    assert started == [None]  # nothing forked
    two, started = _block(ctx, plan, monkeypatch, fork=True)
    assert len(started) == 1 and started[0] is not None and started[0].pid > 0
    assert two == one
    assert '"comparisons"' in one and '"tornado"' in one  # the verdict's parts are in it


def test_a_failed_child_leaves_the_work_here(planned, monkeypatch):
    ctx, plan = planned
    one, _ = _block(ctx, plan, monkeypatch, fork=False)

    def broken(*a, **k):
        raise RuntimeError("the child fails")

    monkeypatch.setattr(split, "_child", broken)
    joined = []
    real_join = split.Pending.join
    monkeypatch.setattr(
        split.Pending, "join", lambda self, idle=None: joined.append(real_join(self, idle))
    )
    two, started = _block(ctx, plan, monkeypatch, fork=True)
    assert started[0] is not None and joined == [False]
    assert two == one


def test_verdicts_found_while_the_child_is_still_busy_are_the_same(planned, monkeypatch):
    # a slow child: this process runs out of tornado points and finds the verdict's figures
    # (block._verdicts_ahead) before the child's chains reach it; the block is the same
    import time

    ctx, plan = planned
    one, _ = _block(ctx, plan, monkeypatch, fork=False)
    real_child = split._child

    def slow(*a, **k):
        out = real_child(*a, **k)
        time.sleep(1.0)  # (in the child: the parent waits on it)
        return out

    ran = []
    real_ahead = block._verdicts_ahead
    monkeypatch.setattr(split, "_child", slow)
    monkeypatch.setattr(block, "_verdicts_ahead", lambda *a: ran.append(1) or real_ahead(*a))
    two, started = _block(ctx, plan, monkeypatch, fork=True)
    assert started[0] is not None and ran == [1]
    assert two == one


def test_a_fleet_sized_ahead_is_taken_only_from_the_same_start(planned):
    ctx, plan = planned
    cls = build_classes(ctx.class_spec)
    fleets = fleet.from_plan(ctx, plan, "plan")
    rates = {a: float(p.goodput_rps) for a, p in plan.plans.items()}
    values = {"prefill_speed": 0.97, "decode_speed": 0.97}

    def evaluator():
        return paired.Evaluator(ctx, cls, fleets, rates, block.plan_caps(ctx, plan))

    ev = evaluator()
    real = ev.sized(values, "idc_pd")
    key = next(k for k in ev.starts if k[0] == "sized")
    start = ev.starts[key]
    marker = object()
    ev = evaluator()
    ev.ahead[key] = (start, marker)  # the same start: the child's fleet, no search here
    assert ev.sized(values, "idc_pd") is marker
    ev = evaluator()
    ev.ahead[key] = (("another start",), marker)  # another: searched here
    assert ev.sized(values, "idc_pd") == real and not ev.ahead
    ev = evaluator()
    ev.size_ahead(values, "idc_pd")  # found before it is asked for: kept apart, then taken
    assert key in ev.ahead and key not in ev._memo
    assert ev.sized(values, "idc_pd") == real and not ev.ahead


def test_an_error_in_the_chains_here_is_raised_by_the_loop(planned, monkeypatch):
    ctx, plan = planned
    bad = block.make_draws(ctx, Options(draws=DRAWS))[0].draw(1)
    real = paired.Evaluator.edge

    def failing(self, values, arch):  # the same draw fails wherever it is evaluated
        if values == bad:
            raise RuntimeError("an edge fails")
        return real(self, values, arch)

    monkeypatch.setattr(paired.Evaluator, "edge", failing)
    with pytest.raises(RuntimeError, match="an edge fails"):
        _block(ctx, plan, monkeypatch, fork=True)


def test_an_error_while_the_child_works_leaves_no_child_behind(planned, monkeypatch):
    import os

    ctx, plan = planned

    def failing(*a, **k):
        raise RuntimeError("N-1 fails")

    monkeypatch.setattr(block, "n_minus_1", failing)
    started: list = []
    real = split.start
    monkeypatch.setattr(
        split, "start", lambda *a, **k: started.append(real(*a, **k)) or started[-1]
    )
    monkeypatch.setattr(split, "can_fork", lambda: True)
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="N-1 fails"):
        warnings.simplefilter("ignore", DeprecationWarning)
        block.assess(ctx, plan, Options(draws=DRAWS))
    assert started[0] is not None
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(started[0].pid, 0)


def test_points_the_parent_sizes_give_the_same_block(planned, monkeypatch):
    """The tornado's points sized here instead of in the child (the child claims none, so this
    process sizes every one while it waits): the same block as one process's."""
    ctx, plan = planned
    one, _ = _block(ctx, plan, monkeypatch, fork=False)
    monkeypatch.setattr(split.Claims, "first", lambda self: None)
    two, started = _block(ctx, plan, monkeypatch, fork=True)
    assert started[0] is not None
    assert two == one


def test_claims_give_each_point_to_one_process():
    """The child claims from the first, this process from the last, each point once."""
    import os

    claims = split.Claims([{"i": i} for i in range(9)])
    r, w = os.pipe()
    with warnings.catch_warnings():  # fork with execnet's thread alive
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: every other claim from the first, until none is left
        got = []
        while (p := claims.first()) is not None:
            got.append(p["i"])
        os.write(w, (",".join(map(str, got)) or "-").encode())
        os._exit(0)
    mine = []
    while (p := claims.last()) is not None:
        mine.append(p["i"])
    os.waitpid(pid, 0)
    theirs = [int(x) for x in os.read(r, 1000).decode().split(",") if x != "-"]
    os.close(r)
    os.close(w)
    assert sorted(mine + theirs) == list(range(9))
    assert mine == sorted(mine, reverse=True) and theirs == sorted(theirs)
