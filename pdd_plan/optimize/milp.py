"""The fleet MILP, built in named steps over plain tables (`tables.FleetTables`).

Integers: instances per decode candidate (relay and main decode, every GPU type and instance
size), the prefill pool size when the rate is a variable. Binaries: which line option (SKU x
count x utilization level) connects the datacenters. Continuous: requests/s of each class on
each path through the chosen line option, and the rate itself when it is a variable.

Constraint families, one function each: demand, line choice and capacity, main-decode and
relay-decode throughput and KV memory, prefill capacity, GPU availability, TTFT percentiles
(the expected share of requests over each target, exact given each class's miss probability),
and the budget. Objectives: minimum cost at a rate; maximum rate (at a budget); or
rate - lambda * cost (one Dinkelbach step for the best goodput per dollar).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pulp

from pdd_plan.common import limits
from pdd_plan.optimize.tables import QUANTILES, FleetTables

EPS = 1e-9
# objective 'goodput' is rate - GOODPUT_COST_WEIGHT * cost: a tie-break on cost, and so a
# Dinkelbach step at this lambda (free_rate.py bounds later steps from it)
GOODPUT_COST_WEIGHT = 1e-6
# At equal cost, fewer instances and lines: a free (owned at $0) instance must not be deployed
# for nothing. Each instance and line adds this many $/hour to the objective only (never to a
# plan's cost): with at most PLAN_INSTANCES (10,000) instances and LINES lines that is under
# a cent per hour, below any price difference the planner reports, so it orders only plans
# whose costs tie.
INSTANCE_TIE_BREAK = 1e-6


@dataclass
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


class _Model:
    """Holds the PuLP problem and its named rows while the steps add to it."""

    def __init__(self, t: FleetTables, sense: int):
        self.t = t
        self.prob = pulp.LpProblem("fleet", sense)
        self.rows: dict[str, pulp.LpConstraint] = {}
        self.owned_terms: list = []  # define_owned: the owned GPUs' discount on the cost

    def add(self, name: str, row: pulp.LpConstraint) -> None:
        self.prob.addConstraint(row, name)
        self.rows[name] = row


def _lin(pairs) -> pulp.LpAffineExpression:
    """A linear expression from (variable, coefficient) pairs, built in one go (much faster
    than summing products) and without zero terms."""
    return pulp.LpAffineExpression([(v, float(a)) for v, a in pairs if a != 0.0])


def _var(m: _Model, name: str, low: float = 0, up: float | None = None, cat: str = "Continuous"):
    return m.prob.add_variable(name, lowBound=low, upBound=up, cat=cat)


# ------------------------------------------------------------------ named steps


def define_variables(m: _Model) -> None:
    t = m.t
    m.n = {c.key: _var(m, f"n_{i}", cat="Integer") for i, c in enumerate(t.md + t.rld)}
    m.z = {o: _var(m, f"z_{o}", up=1, cat="Binary") for o in range(len(t.lines))}
    m.f = {}
    for o, pt in enumerate(t.paths):
        for p, ok in pt.allowed.items():
            for c in np.flatnonzero(ok):
                m.f[o, p, int(c)] = _var(m, f"f_{o}_{p}_{c}")
    m.r = t.rate_rps if t.rate_rps is not None else _var(m, "rate", up=t.rate_max)
    # flows are in units of `unit` req/s: shares of the rate when it is fixed, so tiny and huge
    # rates give the solver the same well-scaled problem
    m.unit = float(t.rate_rps) if t.rate_rps is not None and t.rate_rps > 0 else 1.0
    m.np_ = None
    if t.rate_rps is None and t.prefill_rate_per_instance > 0:
        lo, hi = t.prefill_instances
        m.np_ = _var(m, "n_prefill", low=lo, up=hi, cat="Integer")


def cost_expr(m: _Model):
    """$/hour: every instance at market price and the line option's cost, less the owned GPUs'
    discount (define_owned: owned_used x (owned - market price); none without `owned:`)."""
    t = m.t
    terms = [m.n[c.key] * c.cost_per_hour for c in t.md + t.rld]
    terms += [m.z[o] * ln.cost_per_hour for o, ln in enumerate(t.lines)]
    terms += m.owned_terms
    prefill = m.np_ * t.prefill_instance_cost if m.np_ is not None else t.prefill_cost_per_hour
    return pulp.lpSum(terms) + prefill


def gpu_use(m: _Model, dc: str, gpu: str):
    """GPUs of `gpu` the plan uses in `dc`: decode instances, and the prefill pool (a variable
    with the rate free, a constant at a fixed rate)."""
    t = m.t
    use = _lin((m.n[c.key], c.gpus) for c in t.md + t.rld if c.datacenter == dc and c.gpu == gpu)
    if t.prefill_gpus and t.prefill_gpus[:2] == (dc, gpu):
        per = t.prefill_gpus[2]
        use += m.np_ * per if m.np_ is not None else t.prefill_instances[0] * per
    return use


def define_owned(m: _Model) -> None:
    """Owned GPUs first, at their price: per (datacenter, GPU type) owned_used <= owned and
    bought >= 0 sum to the GPUs used, and the cost counts owned_used at the owned price and
    bought at market (a discount on the market cost every instance carries). Cheaper owned GPUs
    fill up by themselves; where owned costs more than market, a binary lets the plan buy only
    once every owned GPU is in use. Types whose owned price equals the market's need nothing."""
    t = m.t
    m.owned_terms = []
    for i, ((dc, gpu), og) in enumerate(sorted(t.owned.items())):
        if og.price == og.market:
            continue
        mine = _var(m, f"owned_{i}", up=og.count)
        bought = _var(m, f"bought_{i}")
        m.add(f"owned_split_{i}", mine + bought == gpu_use(m, dc, gpu))
        if og.price > og.market:
            full = _var(m, f"owned_full_{i}", up=1, cat="Binary")
            m.add(f"owned_first_{i}", bought <= max(og.available, 1) * full)
            m.add(f"owned_all_{i}", mine >= og.count * full)
        m.owned_terms.append(mine * (og.price - og.market))


def define_demand(m: _Model) -> None:
    t = m.t
    for c, w in enumerate(t.weight):
        terms = [v for (o, p, cc), v in m.f.items() if cc == c]
        m.add(f"demand_{c}", pulp.lpSum(terms) == m.r / m.unit * float(w))


def define_line(m: _Model) -> None:
    """Exactly one line option; flows only through it; its bytes under its utilization cap."""
    t = m.t
    m.add("line_choice", pulp.lpSum(m.z.values()) == 1)
    big = t.rate_rps if t.rate_rps is not None else t.rate_max
    per: dict[tuple[int, int], list] = {}
    by_option: dict[int, dict] = {}
    for (o, _p, c), v in m.f.items():
        per.setdefault((o, c), []).append(v)
        by_option.setdefault(o, {})[_p, c] = v
    for (o, c), vs in per.items():
        m.add(f"route_{o}_{c}", pulp.lpSum(vs) <= big / m.unit * float(t.weight[c]) * m.z[o])
    for o, ln in enumerate(t.lines):
        if not np.isfinite(ln.capacity_bytes_s):
            continue
        # the row in units of the line's capacity: utilization <= level
        crossing = [
            (v, m.unit * float(t.line_bytes[c]) / ln.capacity_bytes_s)
            for (p, c), v in by_option.get(o, {}).items()
            if t.paths[o].crosses_line[p]
        ]
        if crossing:
            m.add(f"line_capacity_{o}", _lin(crossing) <= ln.level * m.z[o])


def _pool(m: _Model, cands, tokens_of, name: str) -> None:
    """Decode tokens/s under the pool's TPOT-feasible throughput, and KV byte-seconds under its
    memory. Each row is divided by the load it would carry if every request used the pool, so
    flow coefficients stay near 1 at any rate and one instance always counts."""
    t = m.t
    per_class = np.zeros(len(t.weight))
    for o, p, c in m.f:
        per_class[c] = max(per_class[c], float(tokens_of(o, p)[c]))
    if not cands:
        load = _lin((v, tokens_of(o, p)[c]) for (o, p, c), v in m.f.items())
        m.add(f"{name}_none", load <= 0)
        return
    # ... but never below 1/1000 of the smallest instance, so instance coefficients stay
    # below 1e3 (HiGHS rejects huge matrix entries) while any real load still needs one instance
    small = min(t.decode_cap * c.tokens_per_s for c in cands)
    scale = max(m.unit * float(np.dot(t.weight, per_class)), small * 1e-3)
    load = _lin((v, m.unit * tokens_of(o, p)[c] / scale) for (o, p, c), v in m.f.items())
    cap = pulp.lpSum(m.n[c.key] * (t.decode_cap * c.tokens_per_s / scale) for c in cands)
    m.add(f"{name}_throughput", load <= cap)
    step = max(c.step_s for c in cands)  # the slowest step: a request holds its KV longest there
    small_kv = min(t.decode_cap * c.kv_pool_bytes for c in cands)
    kv_scale = max(m.unit * float(np.dot(t.weight, per_class * t.kv_bytes)) * step, small_kv * 1e-3)
    kv = _lin(
        (v, m.unit * tokens_of(o, p)[c] * step * t.kv_bytes[c] / kv_scale)
        for (o, p, c), v in m.f.items()
    )
    room = pulp.lpSum(m.n[c.key] * (t.decode_cap * c.kv_pool_bytes / kv_scale) for c in cands)
    m.add(f"{name}_kv_memory", kv <= room)


def define_decode_capacity(m: _Model) -> None:
    t = m.t
    _pool(m, t.md, lambda o, p: t.paths[o].md_tokens[p], "main_decode")
    _pool(m, t.rld, lambda o, p: t.paths[o].rld_tokens[p], "relay_decode")


def define_prefill(m: _Model) -> None:
    t = m.t
    if m.np_ is not None:
        m.add("prefill_capacity", m.r <= t.prefill_rate_per_instance * m.np_)


def define_gpu_availability(m: _Model) -> None:
    t = m.t
    for (dc, gpu), left in sorted(t.gpus_left.items()):
        use = [m.n[c.key] * c.gpus for c in t.md + t.rld if c.datacenter == dc and c.gpu == gpu]
        if m.np_ is not None and t.prefill_gpus and t.prefill_gpus[:2] == (dc, gpu):
            use.append(m.np_ * t.prefill_gpus[2])
        if use:
            m.add(f"gpus_{dc}_{gpu}", pulp.lpSum(use) <= left)


def define_ttft_percentiles(m: _Model) -> None:
    t = m.t
    for q in QUANTILES:
        miss = _lin((v, t.paths[o].miss[q][p][c]) for (o, p, c), v in m.f.items())
        m.add(f"ttft_p{round(q * 100)}", miss <= (1.0 - q) * m.r / m.unit)


def define_budget(m: _Model) -> None:
    if m.t.budget_per_hour is not None:
        m.add("budget", cost_expr(m) <= m.t.budget_per_hour)


def deployed_expr(m: _Model):
    """Instances and lines the plan deploys: decode instances, the prefill pool when it is a
    variable (at a fixed rate it is a constant), and the chosen line option's line count."""
    t = m.t
    terms = [(m.n[c.key], 1.0) for c in t.md + t.rld]
    terms += [(m.z[o], ln.config.count) for o, ln in enumerate(t.lines) if ln.config is not None]
    if m.np_ is not None:
        terms.append((m.np_, 1.0))
    return _lin(terms)


def define_objective(m: _Model, objective: str, lam: float, tie_break: bool = True) -> None:
    charged = cost_expr(m)
    if tie_break:  # ties: fewer deployed
        charged += INSTANCE_TIE_BREAK * deployed_expr(m)
    if objective == "cost":
        m.prob.setObjective(charged)
    elif objective == "goodput":
        m.prob.setObjective(m.r - GOODPUT_COST_WEIGHT * charged)  # tie-break on cost
    else:  # one Dinkelbach step
        m.prob.setObjective(m.r - lam * charged)


def build(
    t: FleetTables, objective: str = "cost", lam: float = 0.0, tie_break: bool = True
) -> _Model:
    sense = pulp.LpMinimize if objective == "cost" else pulp.LpMaximize
    m = _Model(t, sense)
    define_variables(m)
    define_owned(m)
    define_objective(m, objective, lam, tie_break)
    define_demand(m)
    define_line(m)
    define_decode_capacity(m)
    define_prefill(m)
    define_gpu_availability(m)
    define_ttft_percentiles(m)
    define_budget(m)
    return m


def solve(
    t: FleetTables,
    objective: str = "cost",
    lam: float = 0.0,
    time_limit_s: float = 30.0,
    duals: bool = False,
) -> FleetSolution | None:
    t0 = time.perf_counter()
    limits.check_deadline()
    m = build(t, objective, lam)
    with warnings.catch_warnings(), _quiet_stdout():
        warnings.simplefilter("ignore", DeprecationWarning)
        m.prob.solve(_solver(time_limit_s))
    limits.check_deadline()  # a MILP cut off by the search's deadline is no answer (nor infeasible)
    if pulp.LpStatus[m.prob.status] != "Optimal":
        return None
    sol = _extract(m, time.perf_counter() - t0)
    if duals:
        sol.shadow_prices = _lp_shadow_prices(t, objective, lam, time_limit_s)
    return sol


def _val(x) -> float:
    return float(x.value() or 0.0) if hasattr(x, "value") else float(x)


def _extract(m: _Model, seconds: float) -> FleetSolution:
    t = m.t
    line = max(m.z, key=lambda o: _val(m.z[o]))
    counts = {k: int(round(_val(v))) for k, v in m.n.items()}
    flows: dict[str, np.ndarray] = {p: np.zeros(len(t.weight)) for p in t.paths[line].allowed}
    for (o, p, c), v in m.f.items():
        if o == line:
            flows[p][c] = max(_val(v), 0.0) * m.unit
    cost = max(float(pulp.value(cost_expr(m))), 0.0) + 0.0  # owned at 0: never -0.0
    binding = sorted(
        name
        for name, row in m.rows.items()
        if not name.startswith(("demand", "route_", "line_choice", "owned_"))
        and abs(row.slack or 0.0) < 1e-6
        and any(abs(_val(v)) > EPS for v in row.keys())
    )
    binding = [b if not b.startswith("line_capacity") else "line_capacity" for b in binding]
    npf = int(round(_val(m.np_))) if m.np_ is not None else None
    return FleetSolution(
        "Optimal",
        float(pulp.value(m.prob.objective) or 0.0),
        cost,
        _val(m.r),
        counts,
        npf,
        line,
        flows,
        seconds,
        sorted(set(binding)),
    )


def _lp_shadow_prices(
    t: FleetTables, objective: str, lam: float, time_limit_s: float
) -> dict[str, float]:
    """Duals of the LP relaxation (integers relaxed): $/hour the optimum moves per unit a
    constraint is relaxed. Integer optima have no duals; the relaxation's are the usual proxy.
    Without the instance tie-break: a dual is in $/hour of the plan's cost alone."""
    m = build(t, objective, lam, tie_break=False)
    for v in m.prob.variables():
        if v.cat != "Continuous":
            v.cat = "Continuous"
    with warnings.catch_warnings(), _quiet_stdout():
        warnings.simplefilter("ignore", DeprecationWarning)
        m.prob.solve(_solver(time_limit_s))
    if pulp.LpStatus[m.prob.status] != "Optimal":
        return {}
    out = {}
    for name, row in m.rows.items():
        if name.startswith(("demand", "route_", "line_choice", "owned_")):
            continue
        pi = row.pi
        if pi is not None and abs(round(pi, 6)) > 0:
            out[name] = float(round(pi, 6)) + 0.0  # + 0.0 turns -0.0 into 0.0
    return out


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


def _solver(time_limit_s: float):
    """HiGHS through highspy; CBC only when highspy is missing."""
    time_limit_s = limits.solver_seconds(time_limit_s)  # no further than the search's deadline
    # gapRel 0: the incumbent is proven optimal, not within HiGHS's default 1e-4
    highs = pulp.HiGHS(msg=False, timeLimit=time_limit_s, gapRel=0.0)
    if highs.available():
        return highs
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s)
