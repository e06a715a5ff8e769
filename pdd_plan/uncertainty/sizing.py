"""The verdict's fleet under a draw: the cheapest fleet, of the plan's own instance types and
line, that meets the SLA at the planned rate by evaluate's analytic check.

"PDD beats X" is defined once (docs/model.md, "The verdict"): PDD's cheapest fleet meeting the
SLA at the planned rate costs less than X's (at a free rate, each serves its own planned rate
and the figure is requests per dollar at it). The plan's headline is that comparison at the
nominal inputs, the MILP's fleets. Under a draw the same question is asked of each plan's
fleet resized: instances (of a role's largest group) and lines are added while the fleet
misses, the cheapest addition that meets taken first, else the one that leaves the least
overrun resource; then removed while it still meets, the largest saving first. A local
search from the plan, not a new MILP per draw (that costs about 0.1 s per architecture and
draw): it keeps the plan's GPU types, sizes and line option, which is what a draw's few
percent move; a draw that would want other types is what `--replan` shows. One exception: a
PDD plan without relay decode may add a relay instance (`relay_option`) where no addition of
its own types brings the fleet closer to the SLA (a slow line's transfer tail, which more
prefill or lines do not shorten): PDD without relay is CDC-PD, and read as that alone it
would show no fleet (-100%) where the planner itself would add relay decode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pdd_plan.architectures import ROLE_ORDER
from pdd_plan.evaluate.fleet import FleetSpec
from pdd_plan.optimize.problem import Problem
from pdd_plan.optimize.summary import group

MAX_STEPS = 64  # additions before a fleet is taken as unable to meet the SLA at the rate


OPTIONAL = ("relay_decode",)  # a role a fleet may run none of (PDD without relay is CDC-PD)


def _group_moved(fs: FleetSpec, role: str, by: int) -> FleetSpec | None:
    """`fs` with the role's largest group `by` instances larger (None: no such group, or it
    would leave a role the architecture needs with no instance)."""
    groups = list(fs.instances)
    idx = [k for k, g in enumerate(groups) if g.role == role]
    if not idx:
        return None
    i = max(idx, key=lambda k: groups[k].count)
    g = groups[i]
    n = g.count + by
    left = sum(groups[k].count for k in idx) + by
    if n < 0 or g.count == 0 or (left == 0 and role not in OPTIONAL):
        return None
    if n == 0:
        del groups[i]
    else:
        groups[i] = g.model_copy(
            update={"count": n, "cost_per_hour": g.cost_per_hour / g.count * n}
        )
    return dataclasses.replace(fs, instances=groups)


def relay_option(fs: FleetSpec, pb: Problem, dc: str) -> FleetSpec:
    """`fs` with one relay decode instance it may add (`FleetSpec.addable`) where it runs none:
    the cheapest instance that fits the model on a GPU the relay datacenter `dc` has (ties:
    fewer GPUs), as the planner's own relay instances are of its catalog."""
    if any(g.role == "relay_decode" for g in fs.instances):
        return fs
    best = None
    for gpu, have in sorted(pb.sites.available(dc).items()):
        if have <= 0 or gpu not in pb.catalog.gpus:
            continue
        for inst in pb.catalog.instances(gpu):
            if inst.n_gpus <= have and (
                best is None
                or (inst.cost_per_hour, inst.n_gpus) < (best[1].cost_per_hour, best[1].n_gpus)
            ):
                best = (gpu, inst)
    if best is None:
        return fs
    return dataclasses.replace(fs, addable=(group("relay_decode", best[0], dc, 1, best[1]),))


def _added(fs: FleetSpec) -> FleetSpec | None:
    """`fs` with its addable groups in (None: none to add)."""
    have = {g.role for g in fs.instances if g.count > 0}
    new = [g for g in fs.addable if g.role not in have]
    if not new:
        return None
    return dataclasses.replace(fs, instances=[*fs.instances, *new], addable=())


def _line_moved(fs: FleetSpec, by: int) -> FleetSpec | None:
    ln = fs.line
    if ln is None or ln.count + by < 1:
        return None
    n = ln.count + by
    line = ln.model_copy(update={"count": n, "cost_per_hour": ln.cost_per_hour / ln.count * n})
    return dataclasses.replace(fs, line=line)


def neighbours(fs: FleetSpec, by: int) -> list[tuple[str, FleetSpec]]:
    """(what moved, the fleet) with one instance of each role (and one line) more (by=+1) or
    fewer (by=-1)."""
    roles = sorted({g.role for g in fs.instances if g.count > 0}, key=ROLE_ORDER.get)  # type: ignore[arg-type]
    out = [(r, _group_moved(fs, r, by)) for r in roles] + [("line", _line_moved(fs, by))]
    return [(k, f) for k, f in out if f is not None]


# (meets, worst resource use (1: at its cap), each resource's use: analytic._limits)
Check = Callable[[FleetSpec], tuple[bool, float, dict[str, float]]]

# the rate-linear uses an instance or a line fewer scales exactly (the pooled prefill queue,
# the line's bytes over its capacity, and decode's tokens where one group holds all decode):
# one at or over its cap needs no check to refuse
_LINEAR = {
    "prefill": "prefill_queue",
    "line": "line",
    "main_decode": "decode_tpot",
    "decode": "decode_tpot",
}
_DECODE = ("main_decode", "decode", "relay_decode")


def _count(fs: FleetSpec, what: str) -> int:
    if what == "line":
        return fs.line.count if fs.line is not None else 0
    return sum(g.count for g in fs.instances if g.role == what)


def _hopeless(fs: FleetSpec, what: str, use: dict[str, float]) -> bool:
    """Whether `fs` with one fewer of `what` is sure to refuse: a rate-linear use past its cap."""
    k, n = _LINEAR.get(what), _count(fs, what)
    if what in _DECODE and sum(g.role in _DECODE for g in fs.instances) != 1:
        return False  # decode's capacity is shared over groups: no exact scaling
    # past the cap, not at it: at exactly 1 the check decides (a cap may be inclusive)
    return k is not None and k in use and n > 1 and use[k] * n / (n - 1) > 1.0 + 1e-9


def _no_help(what: str, use: dict[str, float], worst: float) -> bool:
    """Whether one more of `what` is sure to leave the fleet missing, no less overrun: a
    rate-linear use it does not touch is past its cap and is the worst one."""
    mine = "decode_tpot" if what in _DECODE else _LINEAR.get(what)
    return any(
        v > 1.0 + 1e-9 and v >= worst for k, v in use.items() if k in _LINEAR.values() and k != mine
    )


def cheapest(
    fs: FleetSpec,
    check: Check,
    cost: Callable[[FleetSpec], float],
    start: tuple[bool, float, dict[str, float]] | None = None,
) -> FleetSpec | None:
    """The local search of the module doc from `fs` (None: no fleet found meeting the SLA);
    `start`: `check(fs)` where it is known already (from the fleet's goodput)."""
    cur = fs
    ok, worst, use = start if start is not None else check(cur)
    steps = 0
    added = None
    while not ok:
        steps += 1
        tried = [
            (check(f), cost(f), f, what)
            for what, f in neighbours(cur, +1)
            if not _no_help(what, use, worst)
        ]
        meeting = [(c, f, r[2], what) for r, c, f, what in tried if r[0]]
        if meeting:
            _, cur, use, added = min(meeting, key=lambda x: x[0])
            break
        better = [(r[1], c, f, r[2]) for r, c, f, _ in tried if r[1] < worst * (1 - 1e-9)]
        more = _added(cur) if not better else None
        if more is not None and steps < MAX_STEPS:  # none of its own types helps: the
            cur, added = more, more.instances[-1].role  # optional role (see the module doc)
            ok, worst, use = check(cur)
            continue
        if not better or steps >= MAX_STEPS:
            return None
        worst, _, cur, use = min(better, key=lambda x: (x[0], x[1]))
    while True:
        # the role just added comes back out only to the fleet that missed
        fewer = [
            f for what, f in neighbours(cur, -1) if what != added and not _hopeless(cur, what, use)
        ]
        meeting = [(cost(f), f, r[2]) for f in fewer if (r := check(f))[0]]  # type: ignore[misc]
        if not meeting:
            return cur
        _, cur, use = min(meeting, key=lambda x: x[0])  # type: ignore[misc]
