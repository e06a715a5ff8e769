"""What a solved model says: the shared fleet, and per operating point its rate, routing,
elastic instances and whether it used its allowance of SLA violations."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pdd_plan.optimize.milp import elastic, fleet
from pdd_plan.optimize.milp import linear as lp
from pdd_plan.optimize.milp.base import EPS, Model, size
from pdd_plan.optimize.milp.objective import cost_expr


@dataclass(frozen=True)
class FleetSolution:
    status: str
    objective: float
    cost_per_hour: float
    rate_rps: float
    counts: dict[str, int]  # decode candidate key -> instances
    prefill_count: int | None  # variable-rate mode: the prefill pool size chosen
    line_index: int  # index into tables.lines
    flows: dict[str, np.ndarray]  # path -> requests/s per class (through the chosen line)
    seconds: float
    binding: list[str] = field(default_factory=list)
    shadow_prices: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PointSolution:
    rate_rps: float
    flows: dict[str, np.ndarray]  # path -> requests/s per class (through the chosen line)
    elastic: dict[str, int]  # decode candidate key -> elastic instances in this point
    elastic_cost_per_hour: float  # while the point lasts
    violated: bool  # its SLA rows relaxed (the chance constraint's allowance)


@dataclass(frozen=True)
class PointsSolution:
    status: str
    objective: float
    cost_per_hour: float  # averaged over the points by weight: base + weighted elastic
    base_cost_per_hour: float  # the shared fleet and line, paid in every point
    counts: dict[str, int]  # decode candidate key -> base instances
    prefill_count: int | None
    line_index: int
    points: list[PointSolution]
    seconds: float
    binding: list[str]
    size: dict[str, int]  # rows, columns, integers

    def one(self, seconds: float, shadow_prices: dict[str, float] | None = None) -> FleetSolution:
        """The one-point answer in the single-rate planner's shape (with the shadow prices of
        its LP relaxation, when asked for)."""
        p = self.points[0]
        return FleetSolution(
            self.status,
            self.objective,
            self.cost_per_hour,
            p.rate_rps,
            self.counts,
            self.prefill_count,
            self.line_index,
            p.flows,
            seconds,
            self.binding,
            shadow_prices or {},
        )


def value(x) -> float:
    """A variable's value at the solution (0 where it has none), or a number as it is."""
    return float(x.value or 0.0) if isinstance(x, lp.Var) else float(x)


def _point(m: Model, k: int, line: int) -> PointSolution:
    paths = m.pts.point_paths(k)
    n_cls = len(m.pts.class_weight[k])
    flows: dict[str, np.ndarray] = {p: np.zeros(n_cls) for p in paths[line].allowed}
    for (o, p, c), v in m.f[k].items():
        if o == line:
            flows[p][c] = max(value(v), 0.0) * m.unit[k]
    extra = {key: int(round(value(x))) for key, x in m.e[k].items()}
    v = m.v[k]  # type: ignore[assignment]
    return PointSolution(
        value(m.r[k]),
        flows,
        {key: n for key, n in extra.items() if n > 0},
        max(float(lp.value(elastic.elastic_cost(m, k)) or 0.0), 0.0) + 0.0,
        v is not None and value(v) > 0.5,
    )


def _binding(m: Model, plumbing: tuple[str, ...]) -> list[str]:
    binding = sorted(
        name
        for name, row in m.rows.items()
        if not name.startswith(plumbing)
        and abs(row.slack or 0.0) < 1e-6
        and any(abs(value(v)) > EPS for v in row.keys())
    )
    binding = [b if not b.startswith("line_capacity") else "line_capacity" for b in binding]
    return sorted(set(binding))


def extract(m: Model, seconds: float, plumbing: tuple[str, ...]) -> PointsSolution:
    line = fleet.line_index(m, value)
    cost = max(float(lp.value(cost_expr(m))), 0.0) + 0.0  # type: ignore[arg-type]  # owned at 0: never -0.0
    base = max(float(lp.value(fleet.base_cost_expr(m))), 0.0) + 0.0  # type: ignore[arg-type]
    npf = int(round(value(m.np_))) if m.np_ is not None else None
    return PointsSolution(
        m.prob.status,
        float(lp.value(m.prob.objective) or 0.0),
        cost,
        base,
        fleet.counts(m, value),
        npf,
        line,
        [_point(m, k, line) for k in m.points],
        seconds,
        _binding(m, plumbing),
        size(m),
    )
