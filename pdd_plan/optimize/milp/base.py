"""The problem under construction: the program, its named rows, and the variables each step
adds (shared fleet variables once; flows, rate, elastic instances and the violation binary per
operating point).

Names are what the solver orders columns by (`linear.Program` sorts variables by name before
handing them to HiGHS), and so which of several tied optima comes back: a model of one point
carries no point tag, so the nominal plan's names are the single-rate model's.
"""

from __future__ import annotations

from pdd_plan.optimize.milp.linear import Expr, Program, Row, Var
from pdd_plan.optimize.points import OperatingPoints
from pdd_plan.optimize.tables import FleetTables

EPS = 1e-9
# objective 'goodput' is rate - GOODPUT_COST_WEIGHT * cost: a tie-break on cost, and so a
# Dinkelbach step at this lambda (free_rate.py bounds later steps from it)
GOODPUT_COST_WEIGHT = 1e-6


class Model:
    """Holds the program and its named rows while the steps add to it."""

    def __init__(self, pts: OperatingPoints, sense: int):
        self.pts = pts
        self.t: FleetTables = pts.nominal
        self.prob = Program(sense)
        self.rows: dict[str, Row] = self.prob.rows
        self.owned_terms: list = []  # define_owned: the owned GPUs' discount on the cost
        k = len(pts)
        # shared fleet (define_fleet)
        self.n: dict[str, Var] = {}
        self.z: dict[int, Var] = {}
        self.np_: Var | None = None
        # per point (define_flows, define_elastic, define_violations)
        self.f: list[dict[tuple[int, str, int], Var]] = [{} for _ in range(k)]
        self.r: list = [0.0] * k  # req/s: a number, or a variable when the rate is free
        self.unit: list[float] = [1.0] * k
        self.e: list[dict[str, Var]] = [{} for _ in range(k)]
        self.v: list[Var | None] = [None] * k
        self.starts: list[dict[str, Var]] = [{} for _ in range(k)]  # runs.py
        # point k's flow variable -> its class (the big-M of a relaxed row bounds flows by class)
        self.flow_class: list[dict[Var, int]] = [{} for _ in range(k)]

    @property
    def points(self) -> range:
        return range(len(self.pts))

    def tag(self, k: int) -> str:
        """The suffix of point k's variables and rows: none in a one-point model."""
        return "" if len(self.pts) == 1 else f"_k{k}"

    def add(self, name: str, row: Row) -> None:
        self.prob.add_row(name, row)

    def add_sla(self, k: int, name: str, lhs, rhs) -> None:
        """A row of point k's SLA (lhs <= rhs): relaxed by a big-M when the point's violation
        binary is 1 (define_violations). M is the most lhs can reach, so a violated point's row
        never binds; rhs is never negative."""
        v = self.v[k]
        if v is None:
            self.add(name, lhs <= rhs)
            return
        self.add(name, lhs <= rhs + self.flow_bound(k, lhs) * v)

    def flow_bound(self, k: int, lhs: Expr) -> float:
        """The most a row over point k's flows (non-negative coefficients) can reach: a class's
        flows sum to its share of the rate (in flow units), so the row is at most each class's
        share times its largest coefficient, summed over classes."""
        top: dict[int, float] = {}
        for x, a in lhs.items():
            c = self.flow_class[k][x]
            top[c] = max(top.get(c, 0.0), float(a))
        most = self.pts.rate_max[k] if self.pts.rate(k) is None else self.pts.rate(k)
        per_unit = float(most) / self.unit[k]  # type: ignore[arg-type]
        w = self.pts.class_weight[k]
        return sum(per_unit * float(w[c]) * a for c, a in top.items()) * (1 + 1e-9) + 1e-9


def lin(pairs) -> Expr:
    """A linear expression from (variable, coefficient) pairs, built in one go (much faster
    than summing products) and without zero terms."""
    return Expr([(v, float(a)) for v, a in pairs if a != 0.0])


def var(m: Model, name: str, low: float = 0, up: float | None = None, cat: str = "Continuous"):
    return Var(name, low, up, cat)


def size(m: Model) -> dict[str, int]:
    """Rows, columns and integer columns (binaries included) the solver is handed."""
    cols = m.prob.variables()
    ints = sum(1 for c in cols if c.integer)
    return {"rows": len(m.rows), "columns": len(cols), "integers": ints}
