"""Elastic instances: per operating point, decode instances added on top of the shared base
and paid only in that point, at most what a datacenter can add there (`points.Elastic`).

A point's decode rows count base and elastic instances together (flows._instances); the cost
counts each point's elastic instances at their price, weighted by the point's share of the
hours (objective.cost_expr). Owned GPUs first: where a site has owned GPUs cheaper than its
on-demand ones (`Elastic.owned_first`), a point adds elastic instances there only once the
base uses every owned GPU of it (a binary per site).
"""

from __future__ import annotations

from pdd_plan.optimize.milp.base import Model, lin, var
from pdd_plan.optimize.milp.fleet import gpu_use
from pdd_plan.optimize.milp.linear import Expr


def define_elastic(m: Model) -> None:
    """An integer per point and decode candidate whose site can add at least one instance."""
    el = m.pts.elastic
    if el is None:
        return
    site = {s: j for j, s in enumerate(el.sites)}
    for k in m.points:
        for i, c in enumerate(m.t.md + m.t.rld):
            j = site.get((c.datacenter, c.gpu))
            if j is None:
                continue
            most = int(el.gpus[k, j]) // c.gpus
            if most > 0:
                m.e[k][c.key] = var(m, f"e_{i}{m.tag(k)}", up=most, cat="Integer")


def define_elastic_availability(m: Model) -> None:
    """Per point and site: the elastic instances' GPUs under what the site can add."""
    el = m.pts.elastic
    if el is None:
        return
    cands = {c.key: c for c in m.t.md + m.t.rld}
    for k in m.points:
        for j, (dc, gpu) in enumerate(el.sites):
            use = [
                (x, cands[key].gpus)
                for key, x in m.e[k].items()
                if (cands[key].datacenter, cands[key].gpu) == (dc, gpu)
            ]
            if use:
                m.add(f"elastic_gpus_{dc}_{gpu}{m.tag(k)}", lin(use) <= int(el.gpus[k, j]))


def define_owned_first(m: Model) -> None:
    """Per site with GPUs owned first: owned_full binary; each point's elastic GPUs there <=
    what the site can add x owned_full, and the base's GPUs there >= owned x owned_full."""
    el = m.pts.elastic
    if el is None or el.owned_first is None:
        return
    cands = {c.key: c for c in m.t.md + m.t.rld}
    for j, (dc, gpu) in enumerate(el.sites):
        mine = int(el.owned_first[j])
        uses = [
            [(x, cands[key].gpus) for key, x in m.e[k].items() if cands[key].datacenter == dc
             and cands[key].gpu == gpu]
            for k in m.points
        ]  # fmt: skip
        if mine <= 0 or not any(uses):
            continue
        full = var(m, f"owned_first_{j}", up=1, cat="Binary")
        m.add(f"owned_first_base_{j}", gpu_use(m, dc, gpu) >= mine * full)
        for k, use in zip(m.points, uses):
            if use:
                cap = max(int(el.gpus[k, j]), 1)
                m.add(f"owned_first_{dc}_{gpu}{m.tag(k)}", lin(use) <= cap * full)


def elastic_cost(m: Model, k: int):
    """$/hour point k's elastic instances cost while it lasts."""
    el = m.pts.elastic
    if el is None or not m.e[k]:
        return Expr()
    price = {c.key: float(el.cost_per_hour[i]) for i, c in enumerate(m.t.md + m.t.rld)}
    return lin((x, price[key]) for key, x in m.e[k].items())
