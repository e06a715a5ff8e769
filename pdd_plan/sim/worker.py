"""Verification replays beside the planner: the same `sim.run.verify` calls, either in this
process when their results are asked for (`Inline`) or in one forked child process that loads
numba and the kernels while the parent plans, then replays each plan as it is handed over
(`Forked`). A replay is a pure function of its inputs and seed, so both give the same bits; the
child only saves the wall time of numba's loading and of the replays on a second core."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # hints only: the CLI imports this module before anything heavy
    from multiprocessing.connection import Connection

    from pdd_plan.inputs.pieces import ReplaySetup
    from pdd_plan.sim.verdict import Verdict


def _verify(
    rs: ReplaySetup, plan: Any, architecture: str, n: int, seed: int, stage: int = 0
) -> Verdict:
    """`sim.run.verify`; a composed verdict (``stage``) of a plan this process replayed plain
    just before reuses that replay (`sim.run.recomposed`: the same verdict, replayed once)."""
    from pdd_plan.sim import run  # the simulator loads only where a replay runs

    key = (_replay_key(plan, architecture), n, seed)
    if _PLAIN.get("rs") != rs:
        _PLAIN.clear()
        _PLAIN["rs"] = rs
    if len(_PLAIN) > 24:  # a replay holds ~3 MB of arrays per 20,000 requests
        _PLAIN.clear()
        _PLAIN["rs"] = rs
    if stage and (key, stage) in _PLAIN:  # the same replay composed already
        return _PLAIN[(key, stage)]
    if stage and key in _PLAIN:
        got = run.recomposed(rs, plan, architecture, _PLAIN[key], n, seed, stage)
    elif stage:
        got = run.verify(rs, plan, architecture, n, seed, stage_requests=stage)
    elif key in _PLAIN:
        return _PLAIN[key][0]
    else:
        _PLAIN[key] = run.verify_replay(rs, plan, architecture, n, seed)
        return _PLAIN[key][0]
    _PLAIN[(key, stage)] = got
    return got


AHEAD = "ahead"  # the child's one job without a ticket (`Forked.draw_ahead`)

# the replays this process made for the setup it last replayed, plain (verdict and replay) by
# what they replay, length and seed, and composed by that and the stage's length (optimize's
# speculating verification replays each round plain, then composed)
_PLAIN: dict[Any, Any] = {}


def _replay_key(plan: Any, architecture: str) -> Any:
    """What a replay reads of one architecture's plan: its pools, line and rate, and the
    architecture's decode role and whether it crosses a line; where it routes over relay
    decode, the architecture and the whole plan. So PDD planned without a relay decode
    instance shares CDC-PD's replay (the same requests through the same pools: the replay
    routes over relay decode only where the fleet has some, `replay._move_kv`)."""
    from pdd_plan import architectures  # the worker module stays light (the CLI imports it)
    from pdd_plan.sim import setup  # (as above)

    p: Any = None
    a: Any = None
    try:
        p = setup.arch_plan(plan, architecture)
        a = architectures.get(architecture)
    except Exception:  # noqa: BLE001  (the replay itself raises it, in its one-line form)
        p = a = None
    if (
        p is None
        or a is None
        or a.relays
        and any(g.role == "relay_decode" and g.count > 0 for g in p.instances)
    ):
        dump = getattr(plan, "model_dump_json", None)
        return (architecture, dump() if dump is not None else repr(plan))
    line = p.line.model_dump_json() if p.line is not None else None
    groups = tuple(g.model_dump_json() for g in p.instances)
    return (a.decode_role, a.crosses_line, groups, line, p.goodput_rps)


class Inline:
    """Each replay runs in this process when its result is asked for."""

    def __init__(self, rs: ReplaySetup, n_requests: int, seed: int) -> None:
        self.rs, self.n, self.seed = rs, n_requests, seed
        self._jobs: dict[int, tuple[Any, str, int]] = {}
        self._tickets = 0

    def submit(self, plan: Any, architecture: str, stage: int = 0) -> int:
        """A replay to run; ``stage``: `sim.run.verify`'s ``stage_requests``."""
        ticket, self._tickets = self._tickets, self._tickets + 1
        self._jobs[ticket] = (plan, architecture, stage)
        return ticket

    def draw_ahead(self, stage: int) -> None:
        """Nothing: here the prefill stage's requests are drawn when a replay asks for them."""

    def ready(self, ticket: int) -> bool:
        """Always: a replay here runs when its result is asked for."""
        return True

    def result(self, ticket: int) -> Verdict:
        plan, architecture, stage = self._jobs.pop(ticket)
        return _verify(self.rs, plan, architecture, self.n, self.seed, stage)

    def close(self) -> None:
        self._jobs.clear()


def _serve(conn: Connection) -> None:
    """The child: load the kernels and the simulator at once (the parent is reading the
    scenario and planning meanwhile), then replay each (ticket, setup, plan, architecture, n,
    seed, stage) received, in order, until the parent closes its end; an (AHEAD, setup, n,
    seed, stage) draws the prefill stage's requests instead, unless a plan waits behind it."""
    # numba and the simulator: loaded in the child (not the parent), ready before the first plan
    from pdd_plan.sim import kernels, run

    kernels.warm()
    run.prepare()
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job[0] == AHEAD:  # while the first plan is solved: the stage's requests (no answer)
            _, rs, n, seed, stage = job
            if conn.poll():  # a plan waits already: its replay first, the stage draws its own
                continue
            with contextlib.suppress(Exception):  # only a head start: the stage draws its own
                from pdd_plan.sim import tails

                tails.draw_ahead(rs, n, seed, stage)
            continue
        ticket, rs, plan, architecture, n, seed, stage = job
        try:
            out: tuple = (ticket, True, _verify(rs, plan, architecture, n, seed, stage))
        except Exception:  # the parent replays it itself, so the error is its own, unpickled
            out = (ticket, False, None)
        conn.send(out)


class Forked:
    """One child process, forked from this one, that replays the submitted plans in order. It
    can be started before the scenario is read (`started`), so that it loads numba while this
    process loads the rest; `bind` then gives it the replays' setup. When the child is gone
    (killed, out of memory) or a replay fails there, that replay runs here instead."""

    def __init__(self) -> None:
        from multiprocessing import Pipe  # only where a child is forked

        self.inline: Inline | None = None
        self._sent: dict[int, tuple[Any, str, int]] = {}
        self._done: dict[int, tuple[bool, Any]] = {}
        self.conn: Connection | None
        self.conn, child = Pipe()
        sys.stdout.flush()  # nothing buffered here is written twice
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:  # the child: serve, then leave without the parent's exit handlers
            code = 0
            try:
                self.conn.close()
                _serve(child)
            except BaseException:  # noqa: BLE001  (interrupted or broken pipe: the parent decides)
                code = 1
            finally:
                os._exit(code)
        child.close()

    def bind(self, rs: ReplaySetup, n_requests: int, seed: int) -> Forked:
        """The setup, replay length and seed of the replays to come."""
        self.inline = Inline(rs, n_requests, seed)
        return self

    def draw_ahead(self, stage: int) -> None:
        """The child draws the requests of the longest prefill stage a replay may compose
        (``stage``: `sim.tails.draw_ahead`) before the first plan comes: on the default, ~0.15 s
        of the child's CPU moved from beside the draws' chains (three processes on two cores)
        to the time it waits for the plan. Before any `submit`; nothing without a child."""
        if self.conn is None or self.inline is None or not stage:
            return
        i = self.inline
        try:
            self.conn.send((AHEAD, i.rs, i.n, i.seed, int(stage)))
        except OSError:
            self._lost()

    def submit(self, plan: Any, architecture: str, stage: int = 0) -> int:
        ticket = len(self._sent)
        self._sent[ticket] = (plan, architecture, stage)
        if self.conn is not None:
            i: Any = self.inline
            try:
                self.conn.send((ticket, i.rs, plan, architecture, i.n, i.seed, stage))
            except OSError:
                self._lost()
        return ticket

    def ready(self, ticket: int) -> bool:
        """Whether asking for `ticket`'s result would not wait (an answer is there to read, or
        the child is gone and the replay runs here)."""
        if ticket in self._done or self.conn is None:
            return True
        try:
            return self.conn.poll()
        except OSError:
            return True

    def result(self, ticket: int) -> Verdict:
        while ticket not in self._done and self.conn is not None:
            try:
                got, ok, value = self.conn.recv()
            except (EOFError, OSError):
                self._lost()
                break
            self._done[got] = (ok, value)
        ok, value = self._done.pop(ticket, (False, None))  # not there: the child is gone
        if not ok:  # the replay failed in the child: here it raises the same error
            return self.inline.result(self.inline.submit(*self._sent[ticket]))  # type: ignore[union-attr]
        return value

    def _lost(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def close(self) -> None:
        """The child holds nothing but what it owes: it is killed (idle, loading, or replaying
        what an error left unread) and reaped."""
        self._lost()
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0


@contextlib.contextmanager
def started(fork: bool) -> Iterator[Forked | None]:
    """A child started now, before the scenario is read, when `fork` and `can_fork()`; killed
    at the block's end whether or not a replay used it."""
    w = Forked() if fork and can_fork() else None
    try:
        yield w
    finally:
        if w is not None:
            w.close()


def can_fork() -> bool:
    """A child helps only with a second core to run on, and forking is safe only from a process
    with one thread (a forked copy of another thread's lock never opens): Linux's /proc tells."""
    if not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"):
        return False
    if len(os.sched_getaffinity(0)) < 2:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def replays(
    rs: ReplaySetup, n_requests: int, seed: int, fork: bool | Forked | None
) -> Inline | Forked:
    """A started child (`started`) bound to this setup; a new one when `fork` is True and
    `can_fork()`; else `Inline`."""
    if isinstance(fork, Forked):
        return fork.bind(rs, n_requests, seed)
    if fork is True and can_fork():
        return Forked().bind(rs, n_requests, seed)
    return Inline(rs, n_requests, seed)


__all__ = ["Inline", "Forked", "can_fork", "replays", "started"]
