"""The draws' evaluation (`paired.evaluate`) on two cores, with the same bits as on one.

A fleet's SLA goodput under a draw is a bisection that starts from the brackets the draws
before it left (`paired.Evaluator.edge`): a chain, in draw order, within each fleet. The rest of
a draw's work is not: whether the fleet meets the planned rate and the verdict's fleet (the
sizing search, `Evaluator.sized`) read only that draw's own edge and checks that are pure
functions of their inputs. So a forked child takes every draw's sizing, and the whole of every
fleet without a line (its chain and its sizing: the cheap ones), while this process runs the
chains of the fleets that cross a line (most of the work: the line's law at each probe) and
hands each draw's edges over as they are found. The child's answers come back as the memo
entries the one-process loop makes (the same functions of the same inputs, pickled exactly:
floats, tuples, fleets), with the chains it ran; `paired.evaluate` then runs its loop over a
full memo, so its arrays, and every later reading of the memo (the tornado, the flips, the
margins), are those of one process. A verdict's fleet found by the child is taken only where
this process would start its search from the same place (`Evaluator.sized`: the same known
check of the planned fleet), so it is the fleet this process would find; that also lets the
child size, after the draws, the points the tornado will ask about (`tornado_points`). Where
no child can be forked (one core, a process with threads, no fork) or the child fails,
nothing is filled in and the loop computes it all."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pdd_plan.sim.worker import can_fork
from pdd_plan.uncertainty import paired, sensitivity

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pdd_plan.uncertainty.draws import Draws

# the memo entries the child makes that are pure functions of their keys, merged as they are:
# the fleets' checks and the relay fleets' check at the planned rate (the verdict's fleets go
# to `Evaluator.ahead`; "model" entries, the analytic models, stay: rebuilt where needed)
PURE = ("check", "meets")
MIN_DRAWS = 8  # fewer: a fork and its pickles cost more than the child saves


class Claims:
    """The tornado's points shared out between the two processes, each point sized once: the
    child claims from the first, this process from the last, under one lock, in memory both
    share (made before the fork)."""

    def __init__(self, points: list[dict]) -> None:
        import multiprocessing as mp  # only where a child is forked

        self.points = list(points)
        self._lock = mp.Lock()
        self._ends = mp.RawArray("i", [0, len(self.points)])  # [next first, one past last]

    def first(self) -> dict | None:
        """The first point neither process has claimed (None: none left)."""
        return self._claim(0)

    def last(self) -> dict | None:
        """The last point neither process has claimed (None: none left)."""
        return self._claim(1)

    def _claim(self, end: int) -> dict | None:
        # held for microseconds: not had in a second, its holder died holding it (none left)
        if not self._lock.acquire(timeout=1.0):
            return None
        try:
            i, j = self._ends[0], self._ends[1]
            if i >= j:
                return None
            self._ends[end] = i + 1 if end == 0 else j - 1
        finally:
            self._lock.release()
        return self.points[i if end == 0 else j - 1]


class Pending:
    """A child filling in an Evaluator's memo; `join` merges what it found (or nothing)."""

    def __init__(self, ev: paired.Evaluator, pid: int, conn: Connection, claims: Claims) -> None:
        self.ev, self.pid, self.conn, self.claims = ev, pid, conn, claims

    def join(self, idle: Callable[[], None] | None = None) -> bool:
        """Wait for the child's entries and merge them; False where it failed (the loop then
        computes them here). Meanwhile this process sizes the tornado's points from the last
        (the child from the first; each point by one of them), kept apart as the child's are
        (`Evaluator.size_ahead`), and then, the child still busy, runs `idle` once (work
        that touches no chain the child runs)."""
        try:
            while not self.conn.poll():
                point = self.claims.last()
                if point is None:
                    if idle is None:
                        break
                    run: Callable[[], None] = idle
                    idle = None
                    run()
                    continue
                _size(self.ev, point)
            got = self.conn.recv()
        except (EOFError, OSError):
            got = None
        finally:
            self.conn.close()
            _reap(self.pid)
        if got is None:
            return False
        memo, sized, done, evaluations = got
        for k, v in memo.items():
            self.ev._memo.setdefault(k, v)
        for k, v in sized.items():
            if k not in self.ev._memo:
                self.ev.ahead.setdefault(k, v)
        for fk, rows in done.items():
            self.ev._done.setdefault(fk, rows)
        self.ev.evaluations += evaluations
        return True


@contextlib.contextmanager
def shared(
    ev: paired.Evaluator,
    draws: Draws,
    planned: dict[str, float],
    points: list[dict] | None = None,
    idle: Callable[[], None] | None = None,
) -> Iterator[Pending | None]:
    """`start` on entry; the block's body runs while the child finishes; on leaving, `join`
    with `idle` (or, on an error in the body, the child killed and reaped, never left
    behind)."""
    pending = start(ev, draws, planned, points)
    try:
        yield pending
    except BaseException:
        if pending is not None:
            pending.conn.close()
            _reap(pending.pid)
        raise
    if pending is not None:
        pending.join(idle)


def start(
    ev: paired.Evaluator, draws: Draws, planned: dict[str, float], points: list[dict] | None = None
) -> Pending | None:
    """Run the line fleets' goodput chains here while a forked child sizes every draw, then
    every fleet at `points` (module doc); None (nothing started, nothing run) where there is no
    child to share with."""
    archs = tuple(ev.fleets)
    mine = {ev.key(a) for a in archs if ev.fleets[a].line is not None}
    if len(draws) < MIN_DRAWS or not mine or not can_fork():
        return None
    from multiprocessing import Pipe  # only where a child is forked

    edges_in, edges_out = Pipe(duplex=False)
    found_in, found_out = Pipe(duplex=False)
    claims = Claims(points or [])
    sys.stdout.flush()  # nothing buffered here is written twice
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: size every draw, send the entries, leave without exit handlers
        code = 0
        try:
            edges_out.close()
            found_in.close()
            found_out.send(_child(ev, draws, planned, mine, edges_in, claims))
        except BaseException:  # noqa: BLE001  (interrupted or broken pipe: the parent computes)
            code = 1
        finally:
            os._exit(code)
    edges_in.close()
    found_out.close()
    try:
        for i in range(len(draws)):
            vals = draws.draw(i)
            found = []
            for a in archs:
                if ev.key(a) in mine:
                    ev.goodput(vals, a)
                    k = ev.edge_key(vals, a)
                    found.append((k, ev._memo[k]))
            try:
                edges_out.send(found)
            except OSError:  # the child is gone: the chains go on here, the loop sizes
                break
    except Exception:  # raised again in its turn by the loop (or an error before it there)
        found_in.close()
        _reap(pid)
        return None
    except BaseException:
        found_in.close()
        _reap(pid)
        raise
    finally:
        edges_out.close()
    return Pending(ev, pid, found_in, claims)


def _child(
    ev: paired.Evaluator,
    draws: Draws,
    planned: dict[str, float],
    mine: set,
    conn: Connection,
    claims: Claims,
) -> tuple[dict, dict, dict, int]:
    """The child's part, in `paired.evaluate`'s order: each draw's edges from the parent (the
    chains of `mine`), then every fleet's meets and sizing, and the chains of the others; and
    every fleet's sizing at the tornado's points it claims (from the first), while it waits
    for the parent's edges and after."""
    before = ev.evaluations

    def size_next() -> bool:
        point = claims.first()
        if point is not None:
            _size(ev, point)
        return point is not None

    for i in range(len(draws)):
        vals = draws.draw(i)
        while not conn.poll() and size_next():
            pass
        for k, e in conn.recv():
            ev._memo[k] = e
        for a in ev.fleets:
            ev.goodput(vals, a)  # a chain of `mine`: the parent's, in the memo already
            ev.meets(vals, a, planned[a] * vals.get("rate", 1.0))
            ev.planned_cost(vals, a)
    while size_next():
        pass
    memo: dict[Any, Any] = {}
    for k, v in ev._memo.items():
        kind = k[0]
        if (isinstance(kind, str) and kind in PURE) or (
            isinstance(kind, tuple) and kind not in mine
        ):
            memo[k] = v  # pure entries, and the edges of the chains run here
    sized = {k: (ev.starts[k], v) for k, v in ev._memo.items() if k[0] == "sized"}
    sized.update({k: v for k, v in ev.ahead.items() if k not in sized})  # the points'
    done = {fk: rows for fk, rows in ev._done.items() if fk not in mine}
    return memo, sized, done, ev.evaluations - before


def tornado_points(draws: Draws, levers: list, search: Any) -> list[dict]:
    """The inputs the tornado asks every fleet's verdict at (`sensitivity.tornado`'s bars, the
    planning margins' included), the median and nominal inputs, and the margins' bars at the
    nominal inputs (`sensitivity.nominal_margins`): worth sizing ahead. Only
    a matter of speed: a fleet sized at a point the verdict never asks about goes unused, and
    one it asks about from another start is sized again (`Evaluator.sized`)."""
    own = {k: float(getattr(search, k)) for k in paired.MARGINS}
    margins = sensitivity.margin_levers(own)
    out: list[dict] = []
    for lv in [*levers, *margins]:
        for level in (sensitivity.LOW, sensitivity.HIGH):
            v = lv.at(draws, level)
            if v not in out:
                out.append(v)
    # the margins' bars at the plan's own inputs (sensitivity.nominal_margins)
    at_plan = [{m.name: v} if v != m.own else {} for m in margins for v in (m.low, m.high)]
    for v in (draws.at(), {}, *at_plan):
        if v not in out:
            out.append(v)
    return out


def _size(ev: paired.Evaluator, vals: dict) -> None:
    """Every fleet's verdict fleet at `vals`, ahead of the loop (`Evaluator.size_ahead`); an
    error is left for the loop to raise where it asks there, if it does."""
    for a in ev.fleets:
        try:
            ev.size_ahead(vals, a)
        except Exception:  # noqa: BLE001  (asked or not, the loop decides)
            continue


def _reap(pid: int) -> None:
    """The child is killed (idle, or still sizing where an error left its answer unread) and
    reaped."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
