"""The one-point cost model's verdict without the solver, where its routing has no choice.

A fixed fleet at a fixed rate (`evaluate`, the uncertainty draws) hands the MILP one line
option, no relay decode and, for each class, one allowed path. Then the demand rows fix every
flow (class c carries its share w_c of the rate), and every row left is either met by those
flows alone (routing, TTFT percentiles, the line's utilization, the empty relay pool) or has
the instances on its right-hand side with a positive coefficient (main-decode throughput and KV
memory), where the most instances the GPU rows allow is the best choice. Evaluating the rows
there is the MILP's feasibility, exactly, without building or solving it: on the default, one
uncertainty block asks ~90 of these.

The rows are the ones `flows.py` builds, term for term, in the same units (flows in shares of
the rate, decode rows divided by their scale), and a row within HiGHS's primal feasibility
tolerance of its bound counts as met, as the solver counts it.
"""

from __future__ import annotations

import math

import numpy as np

from pdd_plan.optimize.tables import QUANTILES, DecodeCandidate, FleetTables

# HiGHS's default primal_feasibility_tolerance: a row this far past its bound is met
TOLERANCE = 1e-7


def verdict(t: FleetTables) -> bool | None:
    """Whether `solve(t, "cost")` finds a plan, where the routing is forced (see above); None
    where it is not (the solver decides)."""
    if t.rate_rps is None or len(t.lines) != 1 or t.rld or t.owned or t.budget_per_hour is not None:
        return None
    pt = t.paths[0]
    names = list(pt.allowed)
    allowed = np.vstack([pt.allowed[p] for p in names]) if names else np.zeros((0, t.weight.size))
    if allowed.size == 0 or np.any(allowed.sum(axis=0) != 1):
        return None
    most = _most_instances(t.md, t.gpus_left)
    if most is None:
        return None
    rate = float(t.rate_rps)
    unit = rate if rate > 0 else 1.0
    w = np.asarray(t.weight, float)
    flow = rate / unit * w  # the demand rows: class c's flow, in shares of the rate
    path = [names[i] for i in np.argmax(allowed, axis=0)]

    def per_class(table: dict[str, np.ndarray]) -> np.ndarray:
        return np.array([float(table[p][c]) for c, p in enumerate(path)])

    ok = _line_met(t, pt, path, flow, unit)
    ok = ok and _pool_met(t, most, flow, per_class(pt.md_tokens), unit)
    ok = ok and _met(float(np.dot(flow, per_class(pt.rld_tokens))), 0.0)  # no relay pool
    for q in QUANTILES:
        ok = ok and _met(float(np.dot(flow, per_class(pt.miss[q]))), (1.0 - q) * rate / unit)
    return bool(ok)


def _met(lhs: float, rhs: float) -> bool:
    return lhs <= rhs + TOLERANCE


def _most_instances(
    cands: list[DecodeCandidate], gpus_left: dict[tuple[str, str], int]
) -> list[float] | None:
    """The most instances of each candidate the GPU rows allow (inf where no row limits it);
    None where two candidates share a row (which to grow is then the solver's choice)."""
    sites = [(c.datacenter, c.gpu) for c in cands]
    if len(set(sites)) != len(sites):
        return None
    return [
        float(gpus_left[s] // c.gpus) if s in gpus_left else math.inf for c, s in zip(cands, sites)
    ]


def _line_met(t: FleetTables, pt, path: list[str], flow: np.ndarray, unit: float) -> bool:
    """`line_capacity`: the crossing bytes in units of the line's capacity, under its level."""
    ln = t.lines[0]
    if not np.isfinite(ln.capacity_bytes_s):
        return True
    crossing = np.array([bool(pt.crosses_line[p]) for p in path])
    coef = unit * np.asarray(t.line_bytes, float) / ln.capacity_bytes_s
    return _met(float(np.dot(flow[crossing], coef[crossing])), float(ln.level))


def _pool_met(
    t: FleetTables, most: list[float], flow: np.ndarray, tokens: np.ndarray, unit: float
) -> bool:
    """`main_decode_throughput` and `main_decode_kv_memory` at the most instances."""
    w, kv_bytes = np.asarray(t.weight, float), np.asarray(t.kv_bytes, float)
    if not t.md:
        return _met(float(np.dot(flow, tokens)), 0.0)
    tps = [c.tokens_per_s for c in t.md]
    small = min(t.decode_cap * x for x in tps)
    scale = max(unit * float(np.dot(w, tokens)), small * 1e-3)
    load = float(np.dot(flow, unit * tokens / scale))
    cap = _offered(most, [t.decode_cap * x / scale for x in tps])
    hold = [t.decode_cap * c.kv_pool_bytes / c.step_s for c in t.md]  # as flows._pool
    kv_scale = max(unit * float(np.dot(w, tokens * kv_bytes)), min(hold) * 1e-3)
    kv = float(np.dot(flow, unit * tokens * kv_bytes / kv_scale))
    room = _offered(most, [x / kv_scale for x in hold])
    return _met(load, cap) and _met(kv, room)


def _offered(most: list[float], per_instance: list[float]) -> float:
    """What the instances offer; an unlimited candidate offers without bound (if anything)."""
    return sum(a * n if a > 0 else 0.0 for n, a in zip(most, per_instance))
