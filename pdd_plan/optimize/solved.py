"""The best plan of one architecture as the drivers return it (`SolverResult`: built from the
winning combination by `search.combo_result`); summary.py measures it. A base type: nothing
here imports a driver."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pdd_plan.latency import paths
from pdd_plan.latency.line import transfer
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import milp, tables
from pdd_plan.optimize.tables import DecodeOption
from pdd_plan.perf.instance import Instance

QS = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class SolverResult:
    architecture: str
    rate: float
    prefill: Instance
    prefill_count: int
    pool: prefill_pool.PrefillPool
    line: transfer.LineConfig | None
    line_rho: float
    options: list[DecodeOption]
    solution: milp.FleetSolution
    times: paths.PathTimes
    cost_per_hour: float
    solve_seconds: float = 0.0
    milps: int = 0
    singular_max_output_tokens: int | None = None
    main_dc: str = ""
    tables: tables.FleetTables | None = None
    # (owned, new) $/hour with an `owned:` section: owned capacity at its price, new spend apart
    owned_split: tuple[float, float] | None = None
    optimality_gap: float = 0.0  # the search's relative gap to the best bound it proved
    dinkelbach_iterations: int | None = None  # the BCR objective's outer iterations
    # path times per stratum with the line at the load the routing puts on it (line_rho), below
    # the level the tables were sized at: what the plan's reported percentiles use
    operating: paths.PathTimes | None = None
    # flows (requests/s per path and class) as the replay's router routes them (its hit rule:
    # whole classes, singular ones on p_rld; routed.router_flows); None: the MILP's stand
    routed: dict[str, np.ndarray] | None = None

    @property
    def flows(self) -> dict[str, np.ndarray]:
        """Requests/s per path and class as the plan is served: the router's, else the MILP's."""
        return self.routed if self.routed is not None else self.solution.flows


def with_duals(p: SolverResult, objective: str, lam: float, time_limit_s: float) -> SolverResult:
    """`p` with the shadow prices of its winning MILP (its LP relaxation). The MILP itself is
    not solved again: the plan is its answer, and the same model solves to the same optimum."""
    assert p.tables is not None  # every driver's result carries the tables it was solved on
    prices = milp.shadow_prices(p.tables, objective, lam, time_limit_s)
    return dataclasses.replace(p, solution=dataclasses.replace(p.solution, shadow_prices=prices))


def with_effort(p: SolverResult, seconds: float, milps: int) -> SolverResult:
    """`p` with what its search cost: wall-clock seconds and MILPs solved."""
    return dataclasses.replace(p, solve_seconds=seconds, milps=milps)
