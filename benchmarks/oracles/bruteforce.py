"""A brute-force reference for the fleet MILP (`model.solve`, objective 'cost', fixed rate).

Enumerates every integer decision -- instances per decode candidate, 0..K each, and every line
option -- and checks each with a pure LP over the continuous rest (the requests/s of each class
on each path), solved by `scipy.optimize.linprog` (HiGHS). It shares no code with `model.py`:
it reads the same `FleetTables` and restates the constraints from docs/model.md, so agreement
between the two is a check of the MILP's formulation and of the solver.

Cost depends on the integer decisions only (instances, the line, the fixed prefill pool), so the
LP is a feasibility check; combinations are visited cheapest first and the first feasible one is
the optimum. A combination whose pools are no bigger, capacity by capacity, than one already
found infeasible on the same line option is infeasible too and skips its LP (and a line option
on which even K of every candidate cannot carry the rate is skipped whole). Exponential in the
number of candidates: for small tables (tests, benchmarks) only.

K for a candidate is the count that alone carries its role's largest possible decode load
(tokens/s at the TPOT throughput and KV byte-seconds, the routing that puts the most load there),
capped by the GPUs left for it: more instances of it could be removed without losing
feasibility, so no optimum uses more (with positive prices).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from pdd_plan.optimize.tables import QUANTILES, DecodeCandidate, FleetTables, LineOption, PathTable

__all__ = ["BruteResult", "solve", "upper_counts", "flows_feasible", "random_tables"]


@dataclass
class BruteResult:
    cost: float
    counts: dict[str, int]
    line_index: int
    combos: int  # integer vectors x line options enumerated
    lps: int  # LPs solved before the optimum was proven

    def __iter__(self):  # (cost, counts, line_index), as the tests unpack it
        return iter((self.cost, self.counts, self.line_index))


def _role_load(t: FleetTables, role: str) -> tuple[np.ndarray, np.ndarray]:
    """Per class, the most tokens and the most KV token-bytes the role can receive (any line
    option, any allowed path)."""
    n = len(t.weight)
    tok = np.zeros(n)
    for pt in t.paths:
        split = pt.md_tokens if role == "md" else pt.rld_tokens
        for p, ok in pt.allowed.items():
            tok = np.maximum(tok, np.where(ok, np.asarray(split[p], float), 0.0))
    return tok, tok * np.asarray(t.kv_bytes, float)


def upper_counts(t: FleetTables) -> list[int]:
    """K per candidate (t.md then t.rld): enough alone for the role's largest load, within GPUs."""
    rate = float(t.rate_rps)
    out = []
    for role, cands in (("md", t.md), ("rld", t.rld)):
        tok, kv = _role_load(t, role)
        need_tok = rate * float(np.dot(t.weight, tok))
        need_kv = rate * float(np.dot(t.weight, kv))
        for c in cands:
            k = 0
            if need_tok > 0:
                k = max(k, math.ceil(need_tok / (t.decode_cap * c.tokens_per_s) - 1e-9))
            if need_kv > 0:
                k = max(k, math.ceil(need_kv / (t.decode_cap * _hold(c)) - 1e-9))
            gpus = t.gpus_left.get((c.datacenter, c.gpu))
            if gpus is not None:
                k = min(k, max(gpus, 0) // c.gpus)
            out.append(k)
    return out


def _normalized(rows: list[tuple[np.ndarray, float]]) -> tuple[np.ndarray, np.ndarray]:
    """A_ub, b_ub with every row divided by its largest magnitude (coefficients near 1)."""
    a, b = [], []
    for coef, rhs in rows:
        s = max(float(np.max(np.abs(coef), initial=0.0)), abs(rhs))
        if s == 0.0:
            continue
        a.append(coef / s)
        b.append(rhs / s)
    return np.array(a), np.array(b)


def flows_feasible(
    t: FleetTables, line: int, md_cap: tuple[float, float], rld_cap: tuple[float, float]
) -> bool:
    """Can the rate be routed through line option `line` given the decode pools' capacities
    (tokens/s, KV bytes) after the utilization cap? Variables: share of the rate per (path,
    class); rows restated from docs/model.md"""
    pt: PathTable = t.paths[line]
    ln: LineOption = t.lines[line]
    rate = float(t.rate_rps)
    w = np.asarray(t.weight, float)
    cols = [(p, int(c)) for p, ok in pt.allowed.items() for c in np.flatnonzero(ok)]
    if not cols:
        return bool(np.all(w <= 0))
    nv = len(cols)

    def row(fn) -> np.ndarray:
        return np.array([float(fn(p, c)) for p, c in cols])

    # demand: every class fully served, shares of the rate
    a_eq = np.zeros((len(w), nv))
    for j, (_p, c) in enumerate(cols):
        a_eq[c, j] = 1.0
    b_eq = w.copy()
    rows: list[tuple[np.ndarray, float]] = []
    if np.isfinite(ln.capacity_bytes_s):
        rows.append(
            (
                row(lambda p, c: rate * t.line_bytes[c] if pt.crosses_line.get(p, True) else 0.0),
                ln.level * ln.capacity_bytes_s,
            )
        )
    for cands, split, (tok_cap, kv_cap) in (
        (t.md, pt.md_tokens, md_cap),
        (t.rld, pt.rld_tokens, rld_cap),
    ):
        tok = row(lambda p, c, s=split: rate * s[p][c])
        rows.append((tok, tok_cap))
        if cands:
            rows.append((tok * row(lambda p, c: t.kv_bytes[c]), kv_cap))
    for q in QUANTILES:
        rows.append((row(lambda p, c, q=q: pt.miss[q][p][c]), 1.0 - q))
    # rows whose load is identically zero are dropped by _normalized only when the bound is 0 too;
    # an all-zero row with a positive bound is trivially satisfied
    a_ub, b_ub = _normalized(rows)
    if len(a_ub):
        keep = np.any(a_ub != 0, axis=1)
        if np.any(~keep & (b_ub < -1e-12)):
            return False
        a_ub, b_ub = a_ub[keep], b_ub[keep]
    res = linprog(
        np.zeros(nv),
        A_ub=a_ub if len(a_ub) else None,
        b_ub=b_ub if len(b_ub) else None,
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=(0, None),
        method="highs",
    )
    return res.status == 0


def _cap(cands: list[DecodeCandidate], n: tuple[int, ...], u: float) -> tuple[float, float]:
    return (
        u * sum(k * c.tokens_per_s for k, c in zip(n, cands)),
        u * sum(k * _hold(c) for k, c in zip(n, cands)),
    )


def _hold(c: DecodeCandidate) -> float:
    """Token-bytes/s one instance's KV memory holds: its pool over its own step (a token's
    bytes stay one step per token of the context; docs/model.md)."""
    return c.kv_pool_bytes / c.step_s


def solve(t: FleetTables, max_combos: int = 2_000_000) -> BruteResult | None:
    """The minimum-cost decision by enumeration; None when nothing is feasible."""
    if t.rate_rps is None:
        raise ValueError("brute force covers the fixed-rate (minimum cost) problem only")
    cands = list(t.md) + list(t.rld)
    ks = upper_counts(t)
    n_combos = math.prod(k + 1 for k in ks) * len(t.lines)
    if n_combos > max_combos:
        raise ValueError(f"{n_combos:,} combinations exceed max_combos={max_combos:,}")
    cost_i = np.array([c.cost_per_hour for c in cands])
    entries = []  # (cost, line, counts)
    for counts in itertools.product(*(range(k + 1) for k in ks)):
        # GPU availability, per (datacenter, GPU type)
        use: dict[tuple[str, str], int] = {}
        for k, c in zip(counts, cands):
            use[c.datacenter, c.gpu] = use.get((c.datacenter, c.gpu), 0) + k * c.gpus
        if any(u > t.gpus_left.get(key, math.inf) for key, u in use.items() if u > 0):
            continue
        base = float(np.dot(cost_i, counts)) + t.prefill_cost_per_hour
        for o, ln in enumerate(t.lines):
            cost = base + ln.cost_per_hour
            if t.budget_per_hour is not None and cost > t.budget_per_hour + 1e-9:
                continue
            entries.append((cost, o, counts))
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    n_md = len(t.md)
    lps = 0
    # every combination's capacities are at most those of K of every candidate (GPU limits
    # aside): where the rate cannot be routed even then, nothing is feasible (one LP per line
    # option instead of one per undominated combination)
    top_md = _cap(t.md, tuple(ks[:n_md]), t.decode_cap)
    top_rld = _cap(t.rld, tuple(ks[n_md:]), t.decode_cap)
    open_lines = set()
    for o in sorted({e[1] for e in entries}):
        lps += 1
        if flows_feasible(t, o, top_md, top_rld):
            open_lines.add(o)
    # capacities (MD tokens/s, MD KV, RLD tokens/s, RLD KV) already found infeasible, per line
    # option: fewer of every capacity is infeasible too, so those need no LP
    # (rows kept in a preallocated array: rebuilding it from a list at every check made the
    # enumeration quadratic in the LPs solved)
    short = [np.empty((64, 4)) for _ in t.lines]
    n_short = [0] * len(t.lines)
    for cost, o, counts in entries:
        if o not in open_lines:
            continue
        md_cap = _cap(t.md, counts[:n_md], t.decode_cap)
        rld_cap = _cap(t.rld, counts[n_md:], t.decode_cap)
        caps = md_cap + rld_cap
        seen = short[o][: n_short[o]]
        if n_short[o] and np.any(np.all(np.array(caps) <= seen, axis=1)):
            continue
        lps += 1
        if flows_feasible(t, o, md_cap, rld_cap):
            return BruteResult(
                cost, {c.key: int(k) for c, k in zip(cands, counts)}, o, n_combos, lps
            )
        if n_short[o] == len(short[o]):
            short[o] = np.concatenate((short[o], np.empty_like(short[o])))
        short[o][n_short[o]] = caps
        n_short[o] += 1
    return None


# ------------------------------------------------------------------ random small tables


def random_tables(seed: int) -> FleetTables:
    """A small random fixed-rate FleetTables: 2-4 classes, 1-2 main-decode and 0-2 relay-decode
    candidates, 1-3 line options; random miss probabilities, token splits, prices and GPU
    availability (sometimes short), so some draws are infeasible."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    rate = 10.0
    w = rng.dirichlet(np.ones(n))
    out = rng.uniform(50, 500, n)  # output tokens per request
    relay = np.minimum(out, rng.uniform(10, 150, n))  # tokens relay decode makes on p_rld_md
    n_md, n_rld = int(rng.integers(1, 3)), int(rng.integers(0, 3))
    kv = rng.uniform(0.5e9, 2e9, n)
    line_bytes = rng.uniform(1e6, 1e8, n)

    def cand(role, i, dc, gpu):
        g = int(rng.choice([1, 2, 4, 8]))
        tps = rng.uniform(600, 2500) if role == "main_decode" else rng.uniform(150, 800)
        return DecodeCandidate(
            key=f"{role}:{dc}:{gpu}:{i}",
            role=role,
            datacenter=dc,
            gpu=gpu,
            gpus=g,
            cost_per_hour=round(float(rng.uniform(2, 30) * g), 2),
            tokens_per_s=float(tps),
            kv_pool_bytes=float(rng.uniform(20e9, 80e9)),
            step_s=float(rng.uniform(0.02, 0.05)),
        )

    # two main-decode candidates may share a GPU type (and so its availability)
    md = [cand("main_decode", i, "B", str(rng.choice(["h200", "h20"]))) for i in range(n_md)]
    rld = [cand("relay_decode", i, "A", str(rng.choice(["h100", "h800"]))) for i in range(n_rld)]
    allowed_relay = rng.random(n) < 0.6 if rld else np.zeros(n, bool)
    allowed_single = allowed_relay & (rng.random(n) < 0.5)
    lines, paths = [], []
    for o in range(int(rng.integers(1, 4))):
        util = rng.uniform(0.2, 1.0)  # the line's load if every request crossed it
        cap = rate * float(np.dot(w, line_bytes)) / util
        lv = float(rng.choice([0.5, 0.65, 0.8, 0.9]))
        lines.append(LineOption(f"line{o}", None, lv, round(float(rng.uniform(1, 20)), 2), cap))
        m90 = np.where(rng.random(n) < 0.5, 0.0, rng.uniform(0, 0.5, n))
        m99 = m90 * rng.uniform(0, 0.3, n)
        r90 = m90 * rng.uniform(0, 0.2, n)
        allowed = {"p_md": np.ones(n, bool)}
        if rld:
            allowed["p_rld_md"] = allowed_relay
            allowed["p_rld"] = allowed_single
        paths.append(
            PathTable(
                allowed=allowed,
                miss={
                    0.9: {"p_md": m90, "p_rld_md": r90, "p_rld": r90},
                    0.99: {"p_md": m99, "p_rld_md": r90 * 0.1, "p_rld": r90 * 0.1},
                },
                md_tokens={"p_md": out, "p_rld_md": out - relay, "p_rld": np.zeros(n)},
                rld_tokens={"p_md": np.zeros(n), "p_rld_md": relay, "p_rld": out},
                crosses_line={"p_md": True, "p_rld_md": True, "p_rld": False},
                times=None,
            )
        )
    gpus_left = {}
    for c in md + rld:
        key = (c.datacenter, c.gpu)
        gpus_left[key] = gpus_left.get(key, 0) + int(rng.integers(2, 8)) * c.gpus
    return FleetTables(
        weight=w,
        line_bytes=line_bytes,
        kv_bytes=kv,
        md=md,
        rld=rld,
        lines=lines,
        paths=paths,
        gpus_left=gpus_left,
        decode_cap=0.9,
        rate_rps=rate,
        prefill_cost_per_hour=round(float(rng.uniform(10, 50)), 2),
    )
