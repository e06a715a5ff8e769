"""Per operating point: requests/s of each class on each path through each line option, and
the rows over them: demand, routing through the chosen line, the line's utilization, main- and
relay-decode throughput and KV memory, prefill capacity (rate free), and the TTFT percentiles.

Flows are in units of the point's rate when it is fixed (shares of it), so tiny and huge rates
give the solver the same well-scaled problem. A point's scale factors (decode speed, KV bytes,
line speed: points.py) enter the rows that read them; its path tables are its own or the
nominal's.
"""

from __future__ import annotations

import math

import numpy as np

from pdd_plan.optimize.milp.base import Model, lin, var
from pdd_plan.optimize.milp.linear import LE, Expr, Row, total
from pdd_plan.optimize.tables import QUANTILES


def define_flows(m: Model) -> None:
    pts = m.pts
    for k in m.points:
        tag, f = m.tag(k), m.f[k]
        for o, pt in enumerate(pts.point_paths(k)):
            for p, ok in pt.allowed.items():
                for c in np.flatnonzero(ok):
                    f[o, p, int(c)] = var(m, f"f_{o}_{p}_{c}{tag}")
        m.flow_class[k] = {v: c for (_o, _p, c), v in f.items()}
        rate = pts.rate(k)
        m.r[k] = rate if rate is not None else var(m, f"rate{tag}", up=float(pts.rate_max[k]))
        m.unit[k] = float(rate) if rate is not None and rate > 0 else 1.0


def _most_rate(m: Model, k: int) -> float:
    rate = m.pts.rate(k)
    return rate if rate is not None else float(m.pts.rate_max[k])


def define_demand(m: Model) -> None:
    for k in m.points:
        w = m.pts.class_weight[k]
        by_class: dict[int, list] = {c: [] for c in range(len(w))}
        for (_o, _p, c), v in m.f[k].items():
            by_class[c].append(v)
        for c in range(len(w)):
            row = total(by_class[c]) == m.r[k] / m.unit[k] * float(w[c])
            m.add(f"demand_{c}{m.tag(k)}", row)


def define_routes(m: Model) -> None:
    """Flows only through the chosen line option, and its bytes under each point's
    utilization cap (the level its path tables were computed at)."""
    for k in m.points:
        _routes(m, k)


def _routes(m: Model, k: int) -> None:
    pts, tag, unit = m.pts, m.tag(k), m.unit[k]
    w = pts.class_weight[k]
    big = _most_rate(m, k)
    per: dict[tuple[int, int], list] = {}
    by_option: dict[int, dict] = {}
    for (o, p, c), v in m.f[k].items():
        per.setdefault((o, c), []).append(v)
        by_option.setdefault(o, {})[p, c] = v
    for (o, c), vs in per.items():
        # total(vs) <= cap * z, built as the operators build it (each flow at 1, z at -cap,
        # constant 0.0) in one go: these rows are most of a model's, and the operators copy
        # per term
        cap = big / unit * float(w[c])
        if cap == 0 or not math.isfinite(
            cap
        ):  # the operators' own: no z term at 0, an error at inf
            m.add(f"route_{o}_{c}{tag}", total(vs) <= cap * m.z[o])
            continue
        row = Expr([*((v, 1) for v in vs), (m.z[o], -cap)], 0.0)
        m.add(f"route_{o}_{c}{tag}", Row(row, LE))
    paths, line_bytes = pts.point_paths(k), pts.line_bytes(k)
    for o, ln in enumerate(m.t.lines):
        if not np.isfinite(ln.capacity_bytes_s):
            continue
        capacity = ln.capacity_bytes_s * float(pts.line_speed[k])
        # the row in units of the line's capacity: utilization <= level
        crossing = [
            (v, unit * float(line_bytes[c]) / capacity)
            for (p, c), v in by_option.get(o, {}).items()
            if paths[o].crosses_line[p]
        ]
        if crossing:
            level = float(pts.line_level[k, o])
            m.add_sla(k, f"line_capacity_{o}{tag}", lin(crossing), level * m.z[o])


def _pool(m: Model, k: int, first: int, cands, tokens: str, name: str) -> None:
    """Decode tokens/s under the pool's TPOT-feasible throughput, and KV byte-seconds under its
    memory, in point k. Each row is divided by the load it would carry if every request used
    the pool, so flow coefficients stay near 1 at any rate and one instance always counts.
    `first`: the index of cands[0] among the tables' decode candidates (md, then rld);
    `tokens`: the path tables' field with the pool's tokens per request."""
    t, pts, f, unit, tag = m.t, m.pts, m.f[k], m.unit[k], m.tag(k)
    paths = pts.point_paths(k)

    def tokens_of(o: int, p: str):
        return getattr(paths[o], tokens)[p]

    w, kv_bytes = pts.class_weight[k], pts.kv_bytes(k)
    per_class = np.zeros(len(w))
    for o, p, c in f:
        per_class[c] = max(per_class[c], float(tokens_of(o, p)[c]))
    if not cands:
        load = lin((v, tokens_of(o, p)[c]) for (o, p, c), v in f.items())
        m.add(f"{name}_none{tag}", load <= 0)
        return
    speed = [float(s) for s in pts.decode_speed[k, first : first + len(cands)]]
    tps = [c.tokens_per_s * s for c, s in zip(cands, speed)]
    # ... but never below 1/1000 of the smallest instance, so instance coefficients stay
    # below 1e3 (HiGHS rejects huge matrix entries) while any real load still needs one instance
    small = min(t.decode_cap * x for x in tps)
    scale = max(unit * float(np.dot(w, per_class)), small * 1e-3)
    load = lin((v, unit * tokens_of(o, p)[c] / scale) for (o, p, c), v in f.items())
    cap = _instances(m, k, cands, [t.decode_cap * x / scale for x in tps])
    m.add_sla(k, f"{name}_throughput{tag}", load, cap)
    # KV bytes held = tokens/s x the step a token takes x bytes: each candidate's memory over
    # its own step is the token-bytes/s it can hold (exact for a pool of one candidate, the
    # balanced split otherwise). Charging every candidate the slowest one's step made a slow
    # option merely on offer shrink a fast one's memory (PDD dearer than IDC-PD in one site).
    hold = [t.decode_cap * c.kv_pool_bytes * s / c.step_s for c, s in zip(cands, speed)]
    kv_scale = max(unit * float(np.dot(w, per_class * kv_bytes)), min(hold) * 1e-3)
    kv = lin((v, unit * tokens_of(o, p)[c] * kv_bytes[c] / kv_scale) for (o, p, c), v in f.items())
    room = _instances(m, k, cands, [x / kv_scale for x in hold])
    m.add_sla(k, f"{name}_kv_memory{tag}", kv, room)


def _instances(m: Model, k: int, cands, per_instance: list[float]):
    """What the pool's instances in point k offer: the base fleet's, then its elastic ones."""
    terms = [m.n[c.key] * a for c, a in zip(cands, per_instance)]
    terms += [m.e[k][c.key] * a for c, a in zip(cands, per_instance) if c.key in m.e[k]]
    return total(terms)


def define_decode_capacity(m: Model) -> None:
    t = m.t
    for k in m.points:
        _pool(m, k, 0, t.md, "md_tokens", "main_decode")
        _pool(m, k, len(t.md), t.rld, "rld_tokens", "relay_decode")


def define_prefill(m: Model) -> None:
    """The rate free: each point's rate under what the shared pool carries at its cap."""
    if m.np_ is None:
        return
    for k in m.points:
        m.add(f"prefill_capacity{m.tag(k)}", m.r[k] <= m.t.prefill_rate_per_instance * m.np_)


def define_ttft_percentiles(m: Model) -> None:
    """The expected share of each point's requests over each TTFT target, at most 1 - q (with
    `pooled_ttft`: of all the points' requests, each point weighted by its hours x rate)."""
    if m.pts.pooled_ttft and len(m.pts) > 1:
        _pooled_ttft(m)
        return
    for k in m.points:
        paths, f = m.pts.point_paths(k), m.f[k]
        for q in QUANTILES:
            miss = lin((v, paths[o].miss[q][p][c]) for (o, p, c), v in f.items())
            name = f"ttft_p{round(q * 100)}{m.tag(k)}"
            m.add_sla(k, name, miss, (1.0 - q) * m.r[k] / m.unit[k])


def _pooled_ttft(m: Model) -> None:
    w = m.pts.weight
    total = sum(float(w[k]) * float(m.pts.rate_rps[k]) for k in m.points)
    for q in QUANTILES:
        terms = []
        for k in m.points:
            paths, scale = m.pts.point_paths(k), float(w[k]) * m.unit[k] / total
            terms += [(v, scale * paths[o].miss[q][p][c]) for (o, p, c), v in m.f[k].items()]
        m.add(f"ttft_p{round(q * 100)}_pooled", lin(terms) <= 1.0 - q)
