"""A head start on the draws: the line fleets' goodput chains run while the planner waits on
its first verification replay, and are taken up by the uncertainty block when its fleets are
the ones the chains ran for.

The planner solves every architecture, hands each plan to the replay child and then waits
for the first verdict (~0.2 s on the development box: the child is still loading numba). The
plans it waits on are, nearly always, the plans it keeps (a replay that misses re-solves).
The draws' costliest part in this process is a chain per line fleet (`split.start`): each
draw's SLA goodput bracketed by the draws before it (`paired.Evaluator.edge`). A chain's
entries are pure functions of the fleet, its caps, the classes, the draws and the order they
are taken in, so the first draws' entries, found in the wait, are exactly those the block
would find; where anything differs (a re-solve moved a fleet or its caps, PDD took CDC-PD's
plan, other draws) nothing is taken and the block computes them all. The result is the same
bits either way (tested); only where the time is spent moves."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdd_plan.uncertainty import paired
from pdd_plan.uncertainty.draws import Draws

# the chains run ahead of the block, kept for one block to take (or none)
_KEPT: list[Ahead] = []


@dataclass
class Ahead:
    """What the chains ran for (`_identity`) and what they found."""

    identity: tuple
    ctx: Any  # held: the identity names it by id
    memo: dict
    done: dict
    evaluations: int


def _identity(ev: paired.Evaluator, d: Draws) -> tuple:
    keys = tuple(sorted((a, ev.key(a)) for a in ev.fleets))
    return (id(ev.ctx), keys, _value(ev.classes), d.names, d.values.tobytes())


def _value(x: Any) -> Any:
    """A hashable value of a dataclass of arrays (the request classes): equal values, equal
    classes."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return tuple((f.name, _value(getattr(x, f.name))) for f in dataclasses.fields(x))
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.shape, x.tobytes())
    return x


def run(ev: paired.Evaluator, d: Draws, stop: Callable[[], bool]) -> int:
    """The line fleets' chains (`split.start`'s part), draw by draw in the block's order,
    until `stop()` says the planner's replay is back; kept for `adopt`. The number of draws
    done."""
    archs = [a for a in ev.fleets if ev.fleets[a].line is not None]
    done = 0
    for i in range(len(d)):
        if stop():
            break
        vals = d.draw(i)
        for a in archs:
            ev.goodput(vals, a)
        done = i + 1
    _KEPT.clear()
    if done:
        _KEPT.append(Ahead(_identity(ev, d), ev.ctx, ev._memo, ev._done, ev.evaluations))
    return done


def adopt(ev: paired.Evaluator, d: Draws) -> bool:
    """`ev` (new, nothing evaluated) given the chains run ahead for the same fleets, caps,
    classes and draws; False (and nothing changed) where none were. Taken once."""
    if not _KEPT:
        return False
    got = _KEPT.pop()
    if got.identity != _identity(ev, d) or ev._memo or ev._done:
        return False
    ev._memo.update(got.memo)
    ev._done.update(got.done)
    ev.evaluations += got.evaluations
    return True


def forget() -> None:
    """Drop what was run ahead (a caller that will not assess those plans)."""
    _KEPT.clear()
