"""Verification replays beside the planner: the same `sim.run.verify` calls, either in this
process when their results are asked for (`Inline`) or in one forked child process that loads
numba and the kernels while the parent plans, then replays each plan as it is handed over
(`Forked`). A replay is a pure function of its inputs and seed, so both give the same bits; the
child only saves the wall time of numba's loading and of the replays on a second core."""

from __future__ import annotations

import os
import signal
import sys
from multiprocessing.connection import Connection
from typing import Any

from pdd_plan.inputs.pieces import ReplaySetup


def _verify(rs: ReplaySetup, plan: Any, architecture: str, n: int, seed: int) -> dict:
    from pdd_plan.sim.run import verify  # the simulator loads only where a replay runs

    return verify(rs, plan, architecture, n, seed)


class Inline:
    """Each replay runs in this process when its result is asked for."""

    def __init__(self, rs: ReplaySetup, n_requests: int, seed: int) -> None:
        self.rs, self.n, self.seed = rs, n_requests, seed
        self._jobs: dict[int, tuple[Any, str]] = {}
        self._tickets = 0

    def submit(self, plan: Any, architecture: str) -> int:
        ticket, self._tickets = self._tickets, self._tickets + 1
        self._jobs[ticket] = (plan, architecture)
        return ticket

    def result(self, ticket: int) -> dict:
        plan, architecture = self._jobs.pop(ticket)
        return _verify(self.rs, plan, architecture, self.n, self.seed)

    def close(self) -> None:
        self._jobs.clear()


def _serve(conn: Connection, rs: ReplaySetup, n: int, seed: int) -> None:
    """The child: load the kernels at once (the parent is planning meanwhile), then replay each
    (ticket, plan, architecture) received, in order, until the parent closes its end."""
    from pdd_plan.sim import kernels  # numba: loaded here, in the child, not in the parent

    kernels.load()
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        ticket, plan, architecture = job
        try:
            out: tuple = (ticket, True, _verify(rs, plan, architecture, n, seed))
        except Exception:  # the parent replays it itself, so the error is its own, unpickled
            out = (ticket, False, None)
        conn.send(out)


class Forked:
    """One child process, forked from this one, that replays the submitted plans in order. When
    the child is gone (killed, out of memory) the replays it owed run here instead."""

    def __init__(self, rs: ReplaySetup, n_requests: int, seed: int) -> None:
        from multiprocessing import Pipe  # only where a child is forked

        self.inline = Inline(rs, n_requests, seed)
        self._sent: dict[int, tuple[Any, str]] = {}
        self._done: dict[int, tuple[bool, Any]] = {}
        self._received: set[int] = set()
        self.conn, child = Pipe()
        sys.stdout.flush()  # nothing buffered here is written twice
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:  # the child: serve, then leave without the parent's exit handlers
            code = 0
            try:
                self.conn.close()
                _serve(child, rs, n_requests, seed)
            except BaseException:  # noqa: BLE001  (interrupted or broken pipe: the parent decides)
                code = 1
            finally:
                os._exit(code)
        child.close()

    def submit(self, plan: Any, architecture: str) -> int:
        ticket = len(self._sent)
        self._sent[ticket] = (plan, architecture)
        if self.conn is not None:
            try:
                self.conn.send((ticket, plan, architecture))
            except OSError:
                self._lost()
        return ticket

    def result(self, ticket: int) -> dict:
        while ticket not in self._done and self.conn is not None:
            try:
                got, ok, value = self.conn.recv()
            except (EOFError, OSError):
                self._lost()
                break
            self._done[got] = (ok, value)
            self._received.add(got)
        ok, value = self._done.pop(ticket, (False, None))  # not there: the child is gone
        if not ok:  # the replay failed in the child: here it raises the same error
            plan, architecture = self._sent[ticket]
            return _verify(self.inline.rs, plan, architecture, self.inline.n, self.inline.seed)
        return value

    def _lost(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def close(self) -> None:
        """An idle child is told to leave; one still replaying (an error cut the planning
        short) is killed, since nobody will read what it owes."""
        owed = len(self._sent) > len(self._received)
        if self.conn is not None and not owed:
            try:
                self.conn.send(None)
            except OSError:
                owed = True
        self._lost()
        if self.pid:
            if owed:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0


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


def replays(rs: ReplaySetup, n_requests: int, seed: int, fork: bool) -> Inline | Forked:
    """`Forked` when asked for and safe (`can_fork`), else `Inline`."""
    if fork and can_fork():
        return Forked(rs, n_requests, seed)
    return Inline(rs, n_requests, seed)


__all__ = ["Inline", "Forked", "can_fork", "replays"]
