"""The fleet MILP for one fixed prefill pool and line: built in named steps over plain tables.

Variables: integer instance counts per decode candidate (relay and main decode), continuous
flows (requests/s) per class and path. Constraints, one function per family: demand, main-decode
throughput and KV memory, relay-decode throughput and KV memory, GPU availability, TTFT
percentiles (the expected share of requests over each SLA, exact given the per-class miss
probabilities). Objective: decode cost (the fixed pool's cost is added by the caller).
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field

import numpy as np
import pulp


@dataclass(frozen=True)
class DecodeCandidate:
    key: str  # unique label
    role: str  # relay_decode | main_decode | decode
    datacenter: str
    gpu: str
    gpus: int  # per instance
    cost_per_hour: float
    tokens_per_s: float  # output tokens/s at the TPOT target (full batch)
    kv_pool_bytes: float
    step_s: float  # step time at that batch


@dataclass
class FleetTables:
    rate_rps: float
    weight: np.ndarray  # per class
    allowed: dict[str, np.ndarray]  # path -> bool per class
    miss: dict[float, dict[str, np.ndarray]]  # quantile -> path -> P(TTFT > SLA) per class
    md_tokens: dict[str, np.ndarray]
    rld_tokens: dict[str, np.ndarray]
    kv_bytes: np.ndarray  # per class, bytes a request holds while decoding
    md: list[DecodeCandidate]
    rld: list[DecodeCandidate]
    gpus_left: dict[tuple[str, str], int]  # (datacenter, gpu) -> GPUs free after the fixed pool
    decode_cap: float = 0.9  # utilization cap on decode slots


@dataclass
class FleetSolution:
    status: str
    cost_per_hour: float
    counts: dict[str, int]
    flows: dict[str, np.ndarray]  # path -> requests/s per class
    seconds: float
    binding: list[str] = field(default_factory=list)


def _define_variables(prob: pulp.LpProblem, t: FleetTables):
    n = {
        c.key: pulp.LpVariable(f"n_{i}", lowBound=0, cat="Integer")
        for i, c in enumerate(t.md + t.rld)
    }
    f = {}
    for p, ok in t.allowed.items():
        for i in np.flatnonzero(ok):
            f[p, int(i)] = pulp.LpVariable(f"f_{p}_{i}", lowBound=0)
    return n, f


def _demand(prob, t: FleetTables, f) -> None:
    for i, w in enumerate(t.weight):
        terms = [f[p, i] for p in t.allowed if (p, i) in f]
        prob += pulp.lpSum(terms) == t.rate_rps * float(w), f"demand_{i}"


def _pool_capacity(
    prob,
    t: FleetTables,
    n,
    f,
    cands: list[DecodeCandidate],
    tokens: dict[str, np.ndarray],
    name: str,
) -> None:
    """Tokens/s under the TPOT-feasible throughput, and KV byte-seconds under the pool."""
    load = pulp.lpSum(f[p, i] * float(tokens[p][i]) for (p, i) in f if p in tokens)
    if not cands:
        prob += load <= 0, f"{name}_none"
        return
    prob += (
        load <= pulp.lpSum(n[c.key] * t.decode_cap * c.tokens_per_s for c in cands),
        f"{name}_throughput",
    )
    step = max(c.step_s for c in cands)  # the slowest step: a request holds KV longest there
    kv = pulp.lpSum(
        f[p, i] * float(tokens[p][i]) * step * float(t.kv_bytes[i]) for (p, i) in f if p in tokens
    )
    prob += (
        kv <= pulp.lpSum(n[c.key] * t.decode_cap * c.kv_pool_bytes for c in cands),
        f"{name}_kv_memory",
    )


def _gpu_availability(prob, t: FleetTables, n) -> None:
    for (dc, gpu), left in sorted(t.gpus_left.items()):
        use = [n[c.key] * c.gpus for c in t.md + t.rld if c.datacenter == dc and c.gpu == gpu]
        if use:
            prob += pulp.lpSum(use) <= left, f"gpus_{dc}_{gpu}"


def _ttft_percentiles(prob, t: FleetTables, f) -> None:
    for q, table in t.miss.items():
        miss = pulp.lpSum(f[p, i] * float(table[p][i]) for (p, i) in f)
        prob += miss <= (1.0 - q) * t.rate_rps, f"ttft_p{round(q * 100)}"


def _objective(prob, t: FleetTables, n) -> None:
    prob += pulp.lpSum(n[c.key] * c.cost_per_hour for c in t.md + t.rld)


def solve(t: FleetTables, time_limit_s: float = 30.0) -> FleetSolution | None:
    prob = pulp.LpProblem("fleet", pulp.LpMinimize)
    n, f = _define_variables(prob, t)
    _objective(prob, t, n)
    _demand(prob, t, f)
    _pool_capacity(prob, t, n, f, t.md, t.md_tokens, "main_decode")
    _pool_capacity(prob, t, n, f, t.rld, t.rld_tokens, "relay_decode")
    _gpu_availability(prob, t, n)
    _ttft_percentiles(prob, t, f)
    solver = _solver(time_limit_s)
    with _quiet_stdout():  # highspy prints a banner on stdout even with msg=False
        prob.solve(solver)
    status = pulp.LpStatus[prob.status]
    if status != "Optimal":
        return None
    counts = {k: int(round(v.value() or 0)) for k, v in n.items()}
    flows = {p: np.zeros(len(t.weight)) for p in t.allowed}
    for (p, i), v in f.items():
        flows[p][i] = max(v.value() or 0.0, 0.0)
    binding = [
        name
        for name, c in prob.constraints.items()
        if not name.startswith("demand")
        and abs(c.slack or 0.0) < 1e-6
        and any((v.value() or 0.0) > 1e-9 for v in c.keys())  # a trivially empty row binds nothing
    ]
    return FleetSolution(
        status,
        float(pulp.value(prob.objective) or 0.0),
        counts,
        flows,
        float(prob.solutionTime),
        binding,
    )


@contextlib.contextmanager
def _quiet_stdout():
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
    highs = pulp.HiGHS(msg=False, timeLimit=time_limit_s)
    if highs.available():
        return highs
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s)
