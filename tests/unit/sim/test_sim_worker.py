"""The replay worker (`sim.worker`): a forked child answers what an inline replay would, in
the order asked; a child that is gone or fails hands its replays back to the parent, which
then raises the parent's own error; forking is refused where it is unsafe."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings

import pytest

from pdd_plan.common.errors import InputError
from pdd_plan.sim import worker

pytestmark = pytest.mark.unit


def _fake_verify(rs, plan, architecture, n, seed, stage=0):
    """Which process replayed what: the child's answers carry its pid, the parent's its own."""
    if plan == "bad":
        raise InputError("scenario.yaml", "sla.tpot_ms", "must be > 0", "e.g. 60")
    if plan == "slow":
        time.sleep(30)
    return {
        "plan": plan,
        "architecture": architecture,
        "n": n,
        "seed": seed,
        "stage": stage,
        "pid": os.getpid(),
    }


@pytest.fixture
def forked(monkeypatch):
    monkeypatch.setattr(worker, "_verify", _fake_verify)  # before the fork: the child has it too
    made = []

    def make():
        with warnings.catch_warnings():  # a test worker has threads of its own (execnet's)
            warnings.simplefilter("ignore", DeprecationWarning)
            w = worker.Forked().bind(None, 500, 7)  # started first, bound later, as the CLI
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


def test_forked_answers_in_the_child_in_any_order(forked):
    w = forked()
    t = [w.submit(f"plan{i}", a) for i, a in enumerate(["pdd", "cdc_pd", "idc_pd"])]
    last, first = w.result(t[2]), w.result(t[0])  # out of order: the earlier ones are kept
    assert (first["plan"], first["architecture"]) == ("plan0", "pdd")
    assert (last["plan"], last["architecture"], last["n"], last["seed"]) == (
        "plan2",
        "idc_pd",
        500,
        7,
    )
    assert {first["pid"], last["pid"], w.result(t[1])["pid"]} == {w.pid} != {os.getpid()}
    staged = w.result(w.submit("plan3", "pdd", 1_000_000))  # a composed replay's stage length
    assert (staged["stage"], first["stage"], staged["pid"]) == (1_000_000, 0, w.pid)


def test_the_child_draws_the_stage_ahead_while_idle_then_answers_in_turn(
    forked, monkeypatch, tmp_path
):
    from pdd_plan.sim import tails

    seen: list = []
    mark = tmp_path / "drawn"

    def ahead(rs, n, seed, most):
        seen.append((rs, n, seed, most))
        mark.write_text(str(most))
        if most < 0:
            raise ValueError("a failed head start")  # the child goes on: the stage draws later

    def verify(rs, plan, a, n, seed, stage=0):
        if plan == "nap":
            time.sleep(0.5)  # busy while the next jobs arrive behind it
        return (plan, list(seen), os.getpid())

    def drawn(most: int) -> None:  # the child has read that head start (it loads kernels first)
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            if mark.exists() and mark.read_text() == str(most):
                return
            time.sleep(0.01)

    monkeypatch.setattr(tails, "draw_ahead", ahead)  # before the fork: the child has them
    monkeypatch.setattr(worker, "_verify", verify)
    w = forked()
    w.draw_ahead(0)  # no stage: nothing sent
    w.draw_ahead(1_000_000)
    drawn(1_000_000)
    w.draw_ahead(-1)
    drawn(-1)
    nap = w.submit("nap", "pdd")
    w.draw_ahead(5)  # read while a plan waits behind it: skipped, that replay is not delayed
    q = w.submit("q", "idc_pd")
    assert (nap, q) == (0, 1)  # the head starts take no ticket
    both = [(None, 500, 7, 1_000_000), (None, 500, 7, -1)]
    assert w.result(q) == ("q", both, w.pid)
    assert w.result(nap) == ("nap", both, w.pid)
    assert seen == []  # drawn in the child, not here
    worker.Inline(None, 500, 7).draw_ahead(1_000_000)  # inline: the stage draws when asked
    assert seen == []


def test_inline_answers_here():
    ok = worker.Inline(None, 500, 7)
    old, worker._verify = worker._verify, _fake_verify
    try:
        r = ok.result(ok.submit("p", "pdd"))
    finally:
        worker._verify = old
    assert (r["plan"], r["pid"]) == ("p", os.getpid())


def test_a_failed_replay_raises_the_parents_own_error(forked):
    w = forked()
    bad, good = w.submit("bad", "pdd"), w.submit("p", "cdc_pd")
    with pytest.raises(InputError, match="sla.tpot_ms"):
        w.result(bad)
    assert w.result(good)["pid"] == w.pid  # the child goes on after a failed replay


def test_a_child_that_is_gone_hands_its_replays_back(forked):
    w = forked()
    assert w.result(w.submit("p", "pdd"))["pid"] == w.pid
    os.kill(w.pid, 9)
    os.waitpid(w.pid, 0)
    w.pid = 0  # reaped here
    r = w.result(w.submit("q", "cdc_pd"))
    assert (r["plan"], r["pid"]) == ("q", os.getpid())


def test_close_kills_a_child_still_replaying(forked, monkeypatch):
    """close() kills the child mid-replay rather than waiting out its 30 s: the child's exit
    status, as reaped, is death by SIGKILL (no wall clock read, so a loaded box cannot fail
    it)."""
    reaped = []
    waitpid = os.waitpid

    def recorded(pid, options):
        got = waitpid(pid, options)
        reaped.append(got)
        return got

    w = forked()
    w.submit("slow", "pdd")
    time.sleep(0.2)  # the child is inside its 30 s replay (or still loading: killed either way)
    pid = w.pid
    monkeypatch.setattr(worker.os, "waitpid", recorded)
    w.close()
    assert w.pid == 0
    [(who, status)] = reaped
    assert who == pid
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def test_no_fork_from_a_process_with_another_thread(monkeypatch):
    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not worker.can_fork()
        assert isinstance(worker.replays(None, 100, 1, fork=True), worker.Inline)
    finally:
        stop.set()
        t.join()


def test_no_fork_on_one_core(monkeypatch):
    monkeypatch.setattr(worker.os, "sched_getaffinity", lambda _: {0}, raising=False)
    assert not worker.can_fork()
    assert isinstance(worker.replays(None, 100, 1, fork=False), worker.Inline)


def test_started_child_is_reaped_at_the_blocks_end(monkeypatch):
    monkeypatch.setattr(worker, "can_fork", lambda: True)
    with worker.started(False) as none:
        assert none is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with worker.started(True) as w:
            pid = w.pid
            assert pid > 0
    assert w.pid == 0
    with pytest.raises(ChildProcessError):  # reaped: no such child left
        os.waitpid(pid, os.WNOHANG)


def test_pdd_without_relay_decode_shares_cdc_pds_replay_and_no_other_does():
    from pdd_plan.outputs.plan import load_plan

    # the default's golden: PDD planned with no relay decode instance, as CDC-PD
    plan = load_plan("tests/golden/pdd-paper.optimize.yaml")
    key = {a: worker._replay_key(plan.arch(a), a) for a in ("pdd", "cdc_pd", "idc_pd")}
    assert key["pdd"] == key["cdc_pd"]
    assert key["idc_pd"] != key["cdc_pd"]  # decode in the prefill's datacenter, no line
    # narrow-line's PDD routes over relay decode: its own replay
    relayed = load_plan("tests/golden/narrow-line.optimize.yaml")
    assert any(g.role == "relay_decode" for g in relayed.arch("pdd").instances)
    got = worker._replay_key(relayed.arch("pdd"), "pdd")
    assert got[0] == "pdd"
    assert got != worker._replay_key(relayed.arch("pdd"), "cdc_pd")  # its fleet as CDC-PD
    # the same pools at another rate: another replay
    other = plan.arch("pdd").model_copy(update={"goodput_rps": 30.0})
    assert worker._replay_key(other, "pdd") != key["cdc_pd"]
