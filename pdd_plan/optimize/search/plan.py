"""Plan one architecture: the entry point over the two drivers.

A given rate is served at minimum cost (fixed_rate.py); with the rate free, the MILP picks it
too (free_rate.py: most goodput, or one Dinkelbach step). Both enumerate what shapes the TTFT
model (main-decode site, prefill GPU, instance size, pool size or utilization level) the same
way (enumeration.py) and explain an empty answer with structured reasons (diagnosis.py).
"""

from __future__ import annotations

from pdd_plan import architectures
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Problem
from pdd_plan.optimize.search import fixed_rate
from pdd_plan.optimize.search.free_rate import FreeRateSearch
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.workload.requests import RequestClasses


def plan_architecture(
    pb: Problem,
    architecture: str,
    classes: RequestClasses,
    rate: float | None,
    caps: Caps | None = None,
    objective: str = "cost",
    lam: float = 0.0,
    budget: float | None = None,
    duals: bool = False,
    rate_cap: float | None = None,
) -> SolverResult:
    """The best plan of one architecture.

    rate given: minimum cost (objective 'cost'). rate None: the rate is a variable, and the
    objective is 'goodput' (most req/s, optionally within `budget` $/hour) or 'dinkelbach'
    (most rate - lam * cost: one Dinkelbach step of the best goodput per dollar).
    """
    spec = architectures.get(architecture)
    caps = caps or Caps.of(pb.search)
    if rate is not None:
        return fixed_rate.plan(pb, spec, classes, rate, caps, duals)
    search = FreeRateSearch(pb, spec, classes, caps, budget, rate_cap)
    return search.solve(objective, lam, duals)
