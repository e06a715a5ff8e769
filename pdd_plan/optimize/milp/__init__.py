"""The fleet MILP over operating points, built in named steps over plain tables.

One fleet, many operating points (`optimize.points.OperatingPoints`; the nominal single-rate
plan is one point). Shared: integers per decode candidate (relay and main decode, every GPU type
and instance size), the prefill pool size when a rate is a variable, binaries for the line
option (SKU x count x utilization level). Per point: requests/s of each class on each path
through the chosen line option, the rate when it is a variable, elastic instances (optional),
a violation binary (optional, the chance constraint).

Families, one function each: shared fleet, owned GPUs and GPU availability (fleet.py); flows,
demand, routing and line capacity, main- and relay-decode throughput and KV memory, prefill
capacity, TTFT percentiles (the expected share of requests over each target, exact given each
class's miss probability) (flows.py); elastic instances (elastic.py); violations and their cap
(chance.py); objectives over points and the budget (objective.py); Dinkelbach on the ratio of
weighted goodput to weighted cost (dinkelbach.py). Objectives: minimum cost; maximum rate (at
a budget); or rate - lambda * cost. Where the routing is forced (forced.py), the verdict needs
no solver.
"""

from pdd_plan.optimize.milp.base import EPS, GOODPUT_COST_WEIGHT, Model, size
from pdd_plan.optimize.milp.dinkelbach import dinkelbach_points
from pdd_plan.optimize.milp.result import FleetSolution, PointSolution, PointsSolution
from pdd_plan.optimize.milp.solver import (
    build,
    build_points,
    shadow_prices,
    solve,
    solve_points,
)

__all__ = [
    "EPS",
    "GOODPUT_COST_WEIGHT",
    "FleetSolution",
    "Model",
    "PointSolution",
    "PointsSolution",
    "build",
    "build_points",
    "dinkelbach_points",
    "shadow_prices",
    "size",
    "solve",
    "solve_points",
]
