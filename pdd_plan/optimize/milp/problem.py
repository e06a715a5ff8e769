"""Build the MILP over operating points in its named steps, solve it, read the answer.

`build`/`solve` take one `FleetTables` (the nominal plan, one point: what the search calls);
`build_points`/`solve_points` take an `OperatingPoints` table. Both are the same model.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

from pdd_plan.common import limits
from pdd_plan.optimize.milp import chance, elastic, fleet, flows, runs
from pdd_plan.optimize.milp.base import Model
from pdd_plan.optimize.milp.linear import MAXIMIZE, MINIMIZE, OPTIMAL
from pdd_plan.optimize.milp.objective import define_budget, define_objective
from pdd_plan.optimize.milp.result import FleetSolution, PointsSolution, extract
from pdd_plan.optimize.points import OperatingPoints, single
from pdd_plan.optimize.tables import FleetTables

# rows that hold by construction (an equality, a routing bound, the one-line choice, the owned
# split) say nothing about what limits the plan: neither binding nor priced
_PLUMBING = ("demand", "route_", "line_choice", "owned_")


def build_points(
    pts: OperatingPoints, objective: str = "cost", lam: float = 0.0, tie_break: bool = True
) -> Model:
    """The model: variables first (shared fleet, per-point flows and rates, elastic instances,
    violation binaries, owned GPUs), the objective, then each family of rows."""
    sense = MINIMIZE if objective == "cost" else MAXIMIZE
    m = Model(pts, sense)
    fleet.define_fleet(m)
    flows.define_flows(m)
    elastic.define_elastic(m)
    runs.define_runs(m)
    chance.define_violations(m)
    fleet.define_owned(m)
    define_objective(m, objective, lam, tie_break)
    flows.define_demand(m)
    fleet.define_line_choice(m)
    flows.define_routes(m)
    flows.define_decode_capacity(m)
    flows.define_prefill(m)
    fleet.define_gpu_availability(m)
    flows.define_ttft_percentiles(m)
    define_budget(m)
    elastic.define_elastic_availability(m)
    elastic.define_owned_first(m)
    chance.define_chance_cap(m)
    return m


def build(
    t: FleetTables, objective: str = "cost", lam: float = 0.0, tie_break: bool = True
) -> Model:
    return build_points(single(t), objective, lam, tie_break)


def solve_points(
    pts: OperatingPoints,
    objective: str = "cost",
    lam: float = 0.0,
    time_limit_s: float = 30.0,
) -> PointsSolution | None:
    """The best shared fleet over `pts`; None when no fleet serves every point (less the
    violations the chance cap allows)."""
    t0 = time.perf_counter()
    limits.check_deadline()
    m = build_points(pts, objective, lam)
    _run(m, time_limit_s)
    limits.check_deadline()  # a MILP cut off by the search's deadline is no answer (nor infeasible)
    if m.prob.status != OPTIMAL:
        return None
    return extract(m, time.perf_counter() - t0, _PLUMBING)


def solve(
    t: FleetTables,
    objective: str = "cost",
    lam: float = 0.0,
    time_limit_s: float = 30.0,
    duals: bool = False,
) -> FleetSolution | None:
    """The nominal plan: one operating point."""
    t0 = time.perf_counter()
    sol = solve_points(single(t), objective, lam, time_limit_s)
    if sol is None:
        return None
    out = sol.one(time.perf_counter() - t0)
    if duals:
        out.shadow_prices = lp_shadow_prices(single(t), objective, lam, time_limit_s)
    return out


def shadow_prices(
    t: FleetTables, objective: str = "cost", lam: float = 0.0, time_limit_s: float = 30.0
) -> dict[str, float]:
    """The nominal plan's shadow prices (:func:`lp_shadow_prices` of its one point), for a
    MILP already solved: its relaxation alone is solved (`solve(duals=True)` solves both)."""
    limits.check_deadline()
    out = lp_shadow_prices(single(t), objective, lam, time_limit_s)
    limits.check_deadline()
    return out


def lp_shadow_prices(
    pts: OperatingPoints, objective: str, lam: float, time_limit_s: float
) -> dict[str, float]:
    """Duals of the LP relaxation (integers relaxed): $/hour the optimum moves per unit a
    constraint is relaxed. Integer optima have no duals; the relaxation's are the usual proxy.
    Without the instance tie-break: a dual is in $/hour of the plan's cost alone."""
    m = build_points(pts, objective, lam, tie_break=False)
    _run(m, time_limit_s, mip=False)
    if m.prob.status != OPTIMAL:
        return {}
    out = {}
    for name, row in m.rows.items():
        if name.startswith(_PLUMBING):
            continue
        pi = row.pi
        if pi is not None and abs(round(pi, 6)) > 0:
            out[name] = float(round(pi, 6)) + 0.0  # + 0.0 turns -0.0 into 0.0
    return out


def _run(m: Model, time_limit_s: float, mip: bool = True) -> None:
    """Solve `m` in HiGHS; `mip` False: its integers relaxed (the LP relaxation)."""
    with _quiet_stdout():
        m.prob.solve(_options(time_limit_s), mip)


_STDOUT_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_stdout():
    """highspy prints a banner on stdout even with msg=False: keep stdout clean for JSON.
    fd 1 is process-wide, so concurrent solves in threads take turns."""
    with _STDOUT_LOCK:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


def _options(time_limit_s: float) -> dict:
    """HiGHS's options for every solve."""
    # gapRel 0: the incumbent is proven optimal, not within HiGHS's default 1e-4. One thread:
    # these models are small (a few thousand rows), where HiGHS's worker threads cost more than
    # they share (the default's solves 3.6 -> 2.6 ms each on the 2-core box, the same answers),
    # and a serial search does not depend on how many cores the machine has
    return {
        "output_flag": False,
        "mip_rel_gap": 0.0,
        "threads": 1,
        "time_limit": float(limits.solver_seconds(time_limit_s)),  # not past the search's deadline
    }
