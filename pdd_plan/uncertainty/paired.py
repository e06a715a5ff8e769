"""Every planned fleet under the same draws (paired): per draw its SLA goodput, $/hour and
capacity BCR, whether it meets the SLA at the (drawn) planned rate, and the verdict's figure:
the cost of the cheapest fleet of its types meeting the SLA at that rate (uncertainty/sizing.py)
and the requests per dollar it gives; the percentiles, the probability that PDD's plan beats
each baseline's on that figure, and its Monte Carlo error.

Fleets that are the same model (the same groups and line, and no relay instances to route
over: PDD without relay decode is CDC-PD) are evaluated once per draw. A draw that dominates
another (every input at least as favourable to every fleet) has at least its goodput, and one
dominated at most: each evaluation starts from the bracket the draws already done give it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdd_plan import architectures
from pdd_plan.evaluate import analytic
from pdd_plan.evaluate.fleet import FleetSpec
from pdd_plan.inputs.context import Context
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Problem
from pdd_plan.outputs.plan_uncertainty import Band
from pdd_plan.uncertainty import perturb, sizing
from pdd_plan.uncertainty.draws import Draws
from pdd_plan.workload.requests import RequestClasses

TIE = 1e-9  # relative BCR difference under which two plans tie
MIN_SPEND = 0.01  # $/hour: optimize.summary's floor under a BCR's denominator (all owned at 0)


def _relays(fs: FleetSpec) -> bool:
    return any(g.role == "relay_decode" and g.count > 0 for g in fs.instances)


def fleet_key(fs: FleetSpec) -> tuple:
    """Equal keys: the same analytic model (see the module doc)."""
    spec = architectures.get(fs.architecture)
    relays = _relays(fs) and spec.relays
    groups = tuple(g.model_dump_json() for g in fs.instances)
    line = fs.line.model_dump_json() if fs.line is not None else None
    who = fs.architecture if relays else (spec.decode_role, spec.crosses_line)
    return (who, groups, line, fs.speed_factor)


_PROBLEMS: dict[int, tuple[Context, Problem]] = {}


def pb_of(ctx: Context) -> Problem:
    """The planner's typed inputs of `ctx`, one object per context (the draws' memo in
    perturb.apply is keyed by it)."""
    hit = _PROBLEMS.get(id(ctx))
    if hit is None or hit[0] is not ctx:  # the entry keeps its context alive
        if len(_PROBLEMS) > 64:
            _PROBLEMS.clear()
        hit = _PROBLEMS[id(ctx)] = (ctx, problem_of(ctx))
    return hit[1]


class Evaluator:
    """SLA goodput of each fleet at given input values, memoized by (fleet, values), with the
    bracket of every new evaluation narrowed by those already done at draws that dominate it
    (monotone: see DIRECTION)."""

    def __init__(
        self,
        ctx: Context,
        classes: RequestClasses,
        fleets: dict[str, FleetSpec],
        planned: dict[str, float] | None = None,
        caps: dict[str, Caps] | None = None,
    ):
        self.ctx, self.classes, self.fleets = ctx, classes, fleets
        self.planned = planned or {}  # each architecture's planned rate (req/s)
        self.caps = caps or {}  # each plan's caps (plan_caps); absent: evaluate's
        self.pb = pb_of(ctx)
        self._memo: dict[tuple, Any] = {}  # edges, verdicts, fleet models and sizings by key
        self._done: dict[tuple, list[tuple[dict[str, float], perturb.Edge]]] = {}
        self.evaluations = 0
        # the sizing search's start per `sized` key, and fleets a child sized ahead of the
        # loop: key -> (the start it searched from, its fleet) (uncertainty/split)
        self.starts: dict[tuple, tuple | None] = {}
        self.ahead: dict[tuple, tuple] = {}

    def caps_of(self, arch: str, values: dict[str, float] | None = None) -> Caps | None:
        """The caps `arch`'s fleet is checked under: the plan's, with a planning margin moved
        where `values` moves one (MARGINS: the tornado's margin bars)."""
        c = self.caps.get(arch) or Caps(decode=1.0)
        own = self.ctx.scenario.search
        # a cap the replay tightened below the scenario's margin stays: the margin is not
        # what binds there
        moved = {
            f: values[k]
            for k, f in MARGINS.items()
            if values and k in values and getattr(c, f) >= getattr(own, k)
        }
        return dataclasses.replace(c, **moved) if moved else self.caps.get(arch)

    def key(self, arch: str, fs: FleetSpec | None = None) -> tuple:
        """The fleet's key (fleet_key) with the caps it is checked under."""
        caps = self.caps.get(arch)
        return (fleet_key(fs or self.fleets[arch]), caps)

    def edge_key(self, values: dict[str, float], arch: str) -> tuple:
        """The memo's key of `edge`: the fleet's key and the inputs that move its goodput."""
        moving = tuple(sorted((k, v) for k, v in values.items() if k in MOVES_GOODPUT))
        return (self.key(arch), moving)

    def edge(self, values: dict[str, float], arch: str) -> perturb.Edge:
        fs = self.fleets[arch]
        key = self.edge_key(values, arch)
        fk, moving = key
        if key not in self._memo:
            done = self._done.setdefault(fk, [])
            x = dict(moving)
            lo = max((e.lo for y, e in done if dominates(x, y)), default=0.0)
            his = [e.hi for y, e in done if dominates(y, x)]
            ap = perturb.apply(self.pb, self.classes, x)
            fm = self._model(x, arch, fs)
            e = perturb.edge(ap, fs, lo, min(his) if his else None, self.caps_of(arch, x), fm)
            self._memo[key] = e
            done.append((x, e))
            self.evaluations += 1
        return self._memo[key]

    def goodput(self, values: dict[str, float], arch: str) -> float:
        return self.edge(values, arch).lo

    def meets(self, values: dict[str, float], arch: str, rate: float) -> bool:
        """Whether the fleet meets the SLA at `rate` under the draw: its goodput covers it,
        and, for a fleet with relay decode, the check at that rate itself passes (a guard:
        the relay gate moves with the rate, closing only for classes that then meet both
        TTFT shares directly, so feasibility is monotone in the rate on the tested fleets,
        tests/unit/optimize/test_relay_gate.py, but not proven so)."""
        if self.goodput(values, arch) < rate * (1 - 1e-9):
            return False
        fs = self.fleets[arch]
        if not (architectures.get(fs.architecture).relays and _relays(fs)):
            return True
        key = ("meets", self.key(arch), tuple(sorted(values.items())), rate)
        if key not in self._memo:
            ap = perturb.apply(self.pb, self.classes, values)
            fm = perturb.fleet_model(ap, fs, self.caps_of(arch, values))
            self._memo[key] = bool(analytic.at_rate(fm, rate).ok)
        return bool(self._memo[key])

    def cost(self, values: dict[str, float], arch: str) -> float:
        return perturb.cost_per_hour(
            self.fleets[arch], values.get("gpu_price", 1.0), values.get("line_price", 1.0)
        )

    def bcr(self, values: dict[str, float], arch: str) -> float:
        """Capacity goodput per dollar: the planned fleet's SLA goodput per dollar."""
        c = self.cost(values, arch)
        return self.goodput(values, arch) * 3600.0 / c if c > 0 else 0.0

    def check(
        self, values: dict[str, float], arch: str, fs: FleetSpec, rate: float
    ) -> tuple[bool, float, dict[str, float]]:
        """Whether `fs` (a resized fleet of `arch`) meets the SLA at `rate` under the draw
        (evaluate's analytic check under the plan's caps), how hard it runs its most used
        resource (1: at its cap), and each resource's use."""
        key = ("check", self.key(arch, fs), tuple(sorted(values.items())), rate)
        if key not in self._memo:
            fm = self._model(values, arch, fs)
            if fm.n_prefill == 0 or not fm.md:  # a fleet without prefill or decode serves none
                self._memo[key] = (False, float("inf"), {})
            else:
                a = analytic.at_rate(fm, rate)
                self._memo[key] = (bool(a.ok), max(a.limits.values(), default=0.0), a.limits)
        return self._memo[key]

    def _model(self, values: dict[str, float], arch: str, fs: FleetSpec):
        """The analytic model of `fs`, a resized fleet of `arch`, under the draw: the planned
        fleet's model built once per draw, recounted for each resize (perturb.recounted)."""
        # the model moves with the inputs that move goodput (prices and the rate do not)
        values = {k: v for k, v in values.items() if k in MOVES_GOODPUT}
        key = ("model", arch, tuple(sorted(values.items())))
        base = self._memo.get(key)
        if base is None:
            ap = perturb.apply(self.pb, self.classes, values)
            base = self._memo[key] = perturb.fleet_model(
                ap, self.fleets[arch], self.caps_of(arch, values)
            )
        fm = perturb.recounted(base, fs)
        if fm is None:
            ap = perturb.apply(self.pb, self.classes, values)
            fm = perturb.fleet_model(ap, fs, self.caps_of(arch, values))
        return fm

    def sized(self, values: dict[str, float], arch: str) -> FleetSpec | None:
        """The verdict's fleet under the draw: the cheapest of the plan's types meeting the SLA
        at the planned rate x the draw's rate factor (None: none found)."""
        key, rate = self._sized_key(values, arch)
        if key not in self._memo:
            start = self.starts[key] = self._known(values, arch, rate)
            ahead = self.ahead.pop(key, None)  # found before it was asked for (size_ahead,
            if ahead is not None and ahead[0] == start:  # a child's): the same start, the same
                self._memo[key] = ahead[1]  # search
            else:
                self._memo[key] = self._search(values, arch, rate, start)
        return self._memo[key]

    def size_ahead(self, values: dict[str, float], arch: str) -> None:
        """`sized` found before it is asked for and kept apart (`ahead`, with its start): taken
        only where the start is the same when it is asked for (uncertainty/split)."""
        key, rate = self._sized_key(values, arch)
        if key not in self._memo and key not in self.ahead:
            start = self._known(values, arch, rate)
            self.ahead[key] = (start, self._search(values, arch, rate, start))

    def _sized_key(self, values: dict[str, float], arch: str) -> tuple[tuple, float]:
        rate = self.planned[arch] * values.get("rate", 1.0)
        # equal fleets (PDD as CDC-PD) at one rate size alike, unless one may add a role
        more = self.fleets[arch].addable
        return ("sized", self.key(arch), more, tuple(sorted(values.items())), rate), rate

    def _search(
        self, values: dict[str, float], arch: str, rate: float, start: tuple | None
    ) -> FleetSpec | None:
        gp, lp = values.get("gpu_price", 1.0), values.get("line_price", 1.0)
        return sizing.cheapest(
            self.fleets[arch],
            lambda f: self.check(values, arch, f, rate),
            lambda f: perturb.cost_per_hour(f, gp, lp),
            start,
        )

    def _known(
        self, values: dict[str, float], arch: str, rate: float
    ) -> tuple[bool, float, dict[str, float]] | None:
        """`check` of the planned fleet at `rate` where its goodput's edge settles it: over
        the edge it misses; under it (a fleet without relay, whose feasibility is monotone in
        the rate) it meets, its rate-linear uses scaled from the edge's served probe."""
        e = self._memo.get(self.edge_key(values, arch))
        if e is None:  # not found for the draw already: one check costs less than an edge
            return None
        if rate > e.hi:
            return (False, float("inf"), {})
        use = e.linear_use(rate)
        if rate <= e.lo and use is not None and not _relays(self.fleets[arch]):
            return (True, max(use.values(), default=0.0), use)
        return None

    def planned_cost(self, values: dict[str, float], arch: str) -> float:
        """$/hour of the verdict's fleet under the draw (inf: no fleet found)."""
        f = self.sized(values, arch)
        if f is None:
            return float("inf")
        return perturb.cost_per_hour(f, values.get("gpu_price", 1.0), values.get("line_price", 1.0))

    def planned_bcr(self, values: dict[str, float], arch: str) -> float:
        """The verdict's figure: requests per dollar at the planned rate, on the cheapest fleet
        meeting the SLA at it (0: none found). At one planned rate for every architecture, a
        ratio of two is the inverse ratio of their costs."""
        c = self.planned_cost(values, arch)
        rate = self.planned[arch] * values.get("rate", 1.0)
        return rate * 3600.0 / max(c, MIN_SPEND) if c < float("inf") else 0.0


# planning margins a tornado bar moves (sensitivity.MARGIN_RANGES): value name -> Caps field
MARGINS = {
    "decode_utilization": "decode",
    "prefill_utilization": "prefill",
    "line_utilization": "line",
}
# the inputs that move a fleet's SLA goodput (prices move its cost, the rate only the verdict)
MOVES_GOODPUT = (
    "prefill_speed",
    "decode_speed",
    "kv_bytes",
    "request_state_bytes",
    "line_rate",
    "prefix_hit",
    *MARGINS,
)
# how each moves it where the models say so for every fleet: +1 more never hurts (faster
# passes, a faster connection), -1 more never helps (more bytes on the line and in memory).
# The prefix-hit shift is left out: it moves which requests relay, not only how fast.
DIRECTION = {
    "decode_utilization": 1,
    "prefill_utilization": 1,
    "line_utilization": 1,
    "prefill_speed": 1,
    "decode_speed": 1,
    "kv_bytes": -1,
    "request_state_bytes": -1,
    "line_rate": 1,
}


def dominates(x: dict[str, float], y: dict[str, float]) -> bool:
    """Whether every fleet's SLA goodput is at least as high under x as under y: each ordered
    input at least as favourable, every other input equal (a missing input is nominal)."""
    for k in set(x) | set(y):
        if k in _PROFILE_NOMINAL and (k in x) != (k in y):
            return False  # its nominal is the model profile's, not known here
        a, b = x.get(k, _NOMINAL.get(k, 1.0)), y.get(k, _NOMINAL.get(k, 1.0))
        d = DIRECTION.get(k)
        if d is None:
            if a != b:
                return False
        elif d * (a - b) < 0:
            return False
    return True


_NOMINAL = {"prefix_hit": 0.0}
_PROFILE_NOMINAL = ("request_state_bytes", *MARGINS)  # nominal: not known here


@dataclass(frozen=True)
class Paired:
    archs: tuple[str, ...]
    goodput: np.ndarray  # (N, A) req/s
    cost: np.ndarray  # (N, A) $/hour
    bcr: np.ndarray  # (N, A) req/$ at the SLA goodput: capacity per dollar
    meets: np.ndarray  # (N, A) bool: goodput >= planned rate x the draw's rate factor
    planned_cost: np.ndarray  # (N, A) $/hour of the cheapest fleet meeting the planned rate
    planned_bcr: np.ndarray  # (N, A) req/$ at the planned rate on it: the verdict's figure

    def column(self, a: str) -> int:
        return self.archs.index(a)


def evaluate(
    ev: Evaluator,
    draws: Draws,
    planned: dict[str, float],
    progress: Callable[[], None] | None = None,
) -> Paired:
    """Every fleet of `ev` under every draw; `planned`: each architecture's planned rate."""
    archs = tuple(ev.fleets)
    n, a = len(draws), len(archs)
    g, c, pc, pb = (np.zeros((n, a)) for _ in range(4))
    meets = np.zeros((n, a), bool)
    for i in range(n):
        vals = draws.draw(i)
        for j, arch in enumerate(archs):
            g[i, j] = ev.goodput(vals, arch)
            c[i, j] = ev.cost(vals, arch)
            meets[i, j] = ev.meets(vals, arch, planned[arch] * vals.get("rate", 1.0))
            pc[i, j] = ev.planned_cost(vals, arch)
            pb[i, j] = ev.planned_bcr(vals, arch)
        if progress is not None:
            progress()
    bcr = np.divide(g * 3600.0, c, out=np.zeros_like(g), where=c > 0)
    return Paired(archs, g, c, bcr, meets, pc, pb)


def band(x: np.ndarray) -> Band:
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return Band()
    p = np.percentile(x, [10, 50, 90])
    return Band(p10=_r(p[0]), p50=_r(p[1]), p90=_r(p[2]))


def _r(x: float) -> float:
    return float(f"{float(x):.4g}")


def gain(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """a / b - 1 (NaN where b is 0: no ratio; +inf would not be a number a file can hold)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.divide(a, b, out=np.full(np.shape(a * b), np.nan), where=b > 0) - 1.0


def beats(p: Paired, a: str, b: str) -> tuple[float, float, float]:
    """(share of draws where a beats b: more requests per dollar at the planned rate on the
    cheapest fleet meeting the SLA; its binomial standard error; the share tied)."""
    x, y = p.planned_bcr[:, p.column(a)], p.planned_bcr[:, p.column(b)]
    tol = TIE * np.maximum(np.abs(x), np.abs(y))
    win = x > y + tol
    tie = np.abs(x - y) <= tol
    n = len(x)
    share = float(np.mean(win))
    # Latin hypercube draws have no larger a variance than independent ones for a response
    # monotone in each input: the binomial error is an upper figure
    se = float(np.sqrt(share * (1 - share) / n))
    return share, se, float(np.mean(tie))
