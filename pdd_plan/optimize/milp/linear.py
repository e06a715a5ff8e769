"""The fleet MILP's modelling layer: variables, linear expressions, named rows, and one bulk
hand-over to HiGHS (highspy, the solver's own Python API).

Not PuLP: on the default scenario PuLP's import, expression objects and solve wrapper cost a
plan ~0.06 s against ~0.055 s in HiGHS itself. This layer does PuLP's arithmetic exactly, so
HiGHS receives the same model entry for entry as through PuLP and returns the same solution
bits (compared on all 194 solves of the bundled examples' plans):

* an expression is a dict from variable to coefficient (insertion order kept) plus a constant;
  adding an expression adds coefficient to coefficient, multiplying by a number multiplies
  each (by 0: no terms at all), a non-finite number is an error;
* `lhs <= rhs` is the row `lhs - rhs <= 0` whose upper bound is minus its constant;
* the columns are the variables the objective and the rows name, sorted by name (so which of
  tied optima comes back does not depend on the order the steps created them); rows keep the
  order they were added; zero coefficients are not handed over;
* after a solve, a variable's value, a row's dual (`pi`) and its slack (rhs minus the row's
  activity for <=, activity minus rhs for >=) are read back; a variable no row names has none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

MINIMIZE, MAXIMIZE = 1, -1
LE, EQ, GE = -1, 0, 1
# model status -> the verdict the search reads: an incumbent cut off by a limit still counts
# as a plan (the search's own deadline check decides whether to keep it)
OPTIMAL, INFEASIBLE, UNBOUNDED, NOT_SOLVED = "Optimal", "Infeasible", "Unbounded", "Not Solved"
# stopped (time or iteration limit, interrupt, objective bound) with an incumbent: a feasible
# answer the solver did not prove optimal, so the plan does not call it "Optimal"
INCUMBENT = "Incumbent (not proven optimal)"
SOLVED = (OPTIMAL, INCUMBENT)  # the statuses with a solution to read back


class Var:
    """A column: name, bounds (None: unbounded), integrality; its value after a solve."""

    __slots__ = ("name", "low", "up", "integer", "value", "index")

    def __init__(
        self, name: str, low: float | None = 0.0, up: float | None = None, cat: str = "Continuous"
    ):
        if cat == "Binary":
            low, up, cat = 0, 1, "Integer"
        for b in (low, up):
            if b is not None and not math.isfinite(b):
                raise ValueError(f"variable {name}: a bound must be finite, got {b}")
        self.name, self.low, self.up = name, low, up
        self.integer = cat == "Integer"
        self.value: float | None = None
        self.index = -1

    # a variable is a dict key by identity (object's hash); arithmetic goes through Expr
    def _e(self) -> Expr:
        return Expr({self: 1})

    def __mul__(self, other: float) -> Expr:
        return self._e() * other

    __rmul__ = __mul__

    def __add__(self, other) -> Expr:
        return self._e() + other

    __radd__ = __add__

    def __sub__(self, other) -> Expr:
        return self._e() - other

    def __rsub__(self, other) -> Expr:
        return (-self._e()).add(other)

    def __neg__(self) -> Expr:
        return -self._e()

    def __truediv__(self, other: float) -> Expr:
        return self._e() / other

    def __le__(self, other) -> Row:
        return self._e() <= other

    def __ge__(self, other) -> Row:
        return self._e() >= other

    def __repr__(self) -> str:
        return self.name


class Expr(dict):
    """sum(coefficient x variable) + constant."""

    __slots__ = ("constant",)

    def __init__(self, terms: Iterable | dict | None = None, constant: float = 0.0):
        if not math.isfinite(constant):
            raise ValueError(f"expression constant must be finite, got {constant}")
        super().__init__(terms or ())
        self.constant = constant

    def copy(self) -> Expr:
        return Expr(self.items(), self.constant)

    def add(self, other, sign: int = 1) -> Expr:
        """In place: self + sign x other (a number, a variable, an expression, or an iterable
        of them)."""
        if isinstance(other, int) and other == 0 or other is None:
            return self
        if isinstance(other, Var):
            self[other] = self[other] + sign if other in self else sign
        elif isinstance(other, Expr):
            self.constant += other.constant * sign
            for v, x in other.items():
                self[v] = self[v] + x * sign if v in self else x * sign
        elif isinstance(other, Iterable):
            for e in other:
                self.add(e, sign)
        elif not math.isfinite(other):
            raise ValueError("cannot add a non-finite number to an expression")
        else:
            self.constant += other * sign
        return self

    def __add__(self, other) -> Expr:
        return self.copy().add(other)

    __radd__ = __add__

    def __iadd__(self, other) -> Expr:
        return self.add(other)

    def __sub__(self, other) -> Expr:
        return self.copy().add(other, -1)

    def __rsub__(self, other) -> Expr:
        return (-self).add(other)

    def __mul__(self, other: float) -> Expr:
        if isinstance(other, (Expr, Var)):
            raise TypeError("expressions are multiplied by numbers only")
        if not math.isfinite(other):
            raise ValueError("cannot multiply an expression by a non-finite number")
        e = Expr()
        if other != 0:
            e.constant = self.constant * other
            for v, x in self.items():
                e[v] = other * x
        return e

    __rmul__ = __mul__

    def __truediv__(self, other: float) -> Expr:
        if not math.isfinite(other):
            raise ValueError("cannot divide an expression by a non-finite number")
        e = Expr(((v, x / other) for v, x in self.items()), self.constant / other)
        return e

    def __neg__(self) -> Expr:
        e = Expr((v, -x) for v, x in self.items())
        e.constant = -self.constant
        return e

    def _row(self, other, sense: int) -> Row:
        if isinstance(other, (int, float)):
            return Row(self, sense, rhs=other)
        return Row(self - other, sense)

    def __le__(self, other) -> Row:
        return self._row(other, LE)

    def __ge__(self, other) -> Row:
        return self._row(other, GE)

    def __eq__(self, other) -> Row:  # type: ignore[override]
        return self._row(other, EQ)

    __hash__ = None

    def evaluate(self) -> float | None:
        """Its value at the solution; None when a variable has none."""
        s = self.constant
        for v, x in self.items():
            if v.value is None:
                return None
            s += v.value * x
        return s


def total(items: Iterable) -> Expr:
    """The sum of numbers, variables and expressions."""
    return Expr().add(items)


def value(x) -> float | None:
    """A number as it is; a variable's or an expression's value at the solution."""
    if isinstance(x, Var):
        return x.value
    if isinstance(x, Expr):
        return x.evaluate()
    return x


class Row:
    """expr (sense) 0, the constant moved to the bound; its dual and slack after a solve."""

    __slots__ = ("expr", "sense", "constant", "pi", "slack", "index")

    def __init__(self, expr: Expr, sense: int, rhs: float | None = None):
        self.expr, self.sense = expr, sense
        self.constant = expr.constant
        if rhs is not None:
            if not math.isfinite(rhs):
                raise ValueError(f"a row's right-hand side must be finite, got {rhs}")
            self.constant -= rhs
        self.pi: float | None = None
        self.slack: float | None = None
        self.index = -1

    def keys(self):
        return self.expr.keys()

    def items(self):
        return self.expr.items()

    @property
    def low(self) -> float | None:
        return -self.constant if self.sense in (GE, EQ) else None

    @property
    def up(self) -> float | None:
        return -self.constant if self.sense in (LE, EQ) else None


class Program:
    """Named rows and an objective over variables; `solve` hands it to HiGHS in bulk."""

    def __init__(self, sense: int = MINIMIZE):
        self.sense = sense
        self.objective = Expr()
        self.rows: dict[str, Row] = {}
        self.status = NOT_SOLVED

    def add_row(self, name: str, row: Row) -> None:
        if name in self.rows:
            raise ValueError(f"duplicate row name {name}")
        self.rows[name] = row

    def variables(self) -> list[Var]:
        """The columns: the objective's and the rows' variables, sorted by name."""
        seen: dict[int, Var] = {}
        for v in self.objective:
            seen.setdefault(id(v), v)
        for row in self.rows.values():
            for v in row.expr:
                seen.setdefault(id(v), v)
        return sorted(seen.values(), key=lambda v: v.name)

    def solve(self, options: dict, mip: bool = True) -> str:
        """Solve with HiGHS under `options` (highspy option name -> value); `mip` False: the
        integers relaxed (the LP relaxation). The status."""
        # the solver's Python module loads with the first solve (~7 ms; a plan may need none)
        import highspy

        h = highspy.Highs()
        for key, val in options.items():
            h.setOptionValue(key, val)
        cols = self.variables()
        rows = list(self.rows.values())
        _hand_over(h, highspy, self, cols, rows, mip)
        h.run()
        self.status = _read_back(h, highspy, cols, rows)
        return self.status


def _hand_over(h, highspy, p: Program, cols: list[Var], rows: list[Row], mip: bool) -> None:
    """One addCols, one changeColsIntegrality, one addRows."""
    inf = highspy.kHighsInf
    mult = -1 if p.sense == MAXIMIZE else 1
    n = len(cols)
    cost, low, up = np.empty(n), np.empty(n), np.empty(n)
    integer = []
    for i, v in enumerate(cols):
        cost[i] = mult * p.objective.get(v, 0.0)
        low[i] = -inf if v.low is None else v.low
        up[i] = inf if v.up is None else v.up
        v.index = i
        if v.integer and mip:
            integer.append(i)
    none = np.zeros(0, np.int32)
    h.addCols(n, cost, low, up, 0, none, none, [])
    if integer:
        kinds = np.full(len(integer), int(highspy.HighsVarType.kInteger), dtype=np.uint8)
        h.changeColsIntegrality(len(integer), np.asarray(integer, dtype=np.int32), kinds)
    starts = np.empty(len(rows), dtype=np.int32)
    r_low, r_up = np.empty(len(rows)), np.empty(len(rows))
    index: list[int] = []
    coef: list[float] = []
    for i, row in enumerate(rows):
        starts[i] = len(index)
        for v, a in row.expr.items():
            if a != 0:
                index.append(v.index)
                coef.append(a)
        row.index = i
        lb, ub = row.low, row.up
        r_low[i] = -inf if lb is None else lb
        r_up[i] = inf if ub is None else ub
    if rows:
        h.addRows(
            len(rows),
            r_low,
            r_up,
            len(index),
            starts,
            np.asarray(index, dtype=np.int32),
            np.asarray(coef, dtype=np.float64),
        )


def _read_back(h, highspy, cols: list[Var], rows: list[Row]) -> str:
    """Values, duals and slacks into the variables and rows; the status."""
    st = highspy.HighsModelStatus
    status = h.getModelStatus()
    sol = h.getSolution()
    values = list(sol.col_value)
    for v in cols:
        v.value = values[v.index]
    activity, duals = list(sol.row_value), list(sol.row_dual)
    for row in rows:
        row.slack = row.constant + activity[row.index]
        if row.sense == LE:
            row.slack *= -1.0
        row.pi = duals[row.index]
    limited = (st.kTimeLimit, st.kIterationLimit)
    if status in limited and h.getObjectiveValue() == math.inf:  # cut off before any incumbent
        return NOT_SOLVED
    if status == st.kOptimal:
        return OPTIMAL
    if status in (st.kObjectiveBound, st.kObjectiveTarget, st.kInterrupt, *limited):
        return INCUMBENT
    if status in (st.kInfeasible, st.kUnboundedOrInfeasible):
        return INFEASIBLE
    if status == st.kUnbounded:
        return UNBOUNDED
    return NOT_SOLVED
