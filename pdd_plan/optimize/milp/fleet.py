"""The shared fleet: instances per decode candidate, the line option, the prefill pool size (a
variable when a rate is free), owned GPUs, GPU availability, the base cost and the budget.

Every operating point runs on this fleet; what a point adds on top of it is in elastic.py.
"""

from __future__ import annotations

from pdd_plan.optimize.milp.base import Model, lin, var
from pdd_plan.optimize.milp.linear import total


def define_fleet(m: Model) -> None:
    t = m.t
    m.n = {c.key: var(m, f"n_{i}", cat="Integer") for i, c in enumerate(t.md + t.rld)}
    m.z = {o: var(m, f"z_{o}", up=1, cat="Binary") for o in range(len(t.lines))}
    # the pool's size is a decision only with the rate free; one pool serves every point
    free = any(m.pts.rate(k) is None for k in m.points)
    if free and t.prefill_rate_per_instance > 0:
        lo, hi = t.prefill_instances
        m.np_ = var(m, "n_prefill", low=lo, up=hi, cat="Integer")


def base_cost_expr(m: Model):
    """$/hour of the shared fleet: every instance at market price and the line option's cost,
    less the owned GPUs' discount (define_owned: owned_used x (owned - market price); none
    without `owned:`). Paid in every point."""
    t = m.t
    terms = [m.n[c.key] * c.cost_per_hour for c in t.md + t.rld]
    terms += [m.z[o] * ln.cost_per_hour for o, ln in enumerate(t.lines)]
    terms += m.owned_terms
    prefill = m.np_ * t.prefill_instance_cost if m.np_ is not None else t.prefill_cost_per_hour
    return total(terms) + prefill


def gpu_use(m: Model, dc: str, gpu: str):
    """GPUs of `gpu` the base fleet uses in `dc`: decode instances, and the prefill pool (a
    variable with the rate free, a constant at a fixed rate)."""
    t = m.t
    use = lin((m.n[c.key], c.gpus) for c in t.md + t.rld if c.datacenter == dc and c.gpu == gpu)
    if t.prefill_gpus and t.prefill_gpus[:2] == (dc, gpu):
        per = t.prefill_gpus[2]
        use += m.np_ * per if m.np_ is not None else t.prefill_instances[0] * per
    return use


def define_owned(m: Model) -> None:
    """Owned GPUs first, at their price: per (datacenter, GPU type) owned_used <= owned and
    bought >= 0 sum to the GPUs used, and the cost counts owned_used at the owned price and
    bought at market (a discount on the market cost every instance carries). Cheaper owned GPUs
    fill up by themselves; where owned costs more than market, a binary lets the plan buy only
    once every owned GPU is in use. Types whose owned price equals the market's need nothing.
    Elastic instances are bought by the hour and never owned."""
    t = m.t
    m.owned_terms = []
    for i, ((dc, gpu), og) in enumerate(sorted(t.owned.items())):
        if og.price == og.market:
            continue
        mine = var(m, f"owned_{i}", up=og.count)
        bought = var(m, f"bought_{i}")
        m.add(f"owned_split_{i}", mine + bought == gpu_use(m, dc, gpu))
        if og.price > og.market:
            full = var(m, f"owned_full_{i}", up=1, cat="Binary")
            m.add(f"owned_first_{i}", bought <= max(og.available, 1) * full)
            m.add(f"owned_all_{i}", mine >= og.count * full)
        m.owned_terms.append(mine * (og.price - og.market))


def define_gpu_availability(m: Model) -> None:
    t = m.t
    for (dc, gpu), left in sorted(t.gpus_left.items()):
        use = [m.n[c.key] * c.gpus for c in t.md + t.rld if c.datacenter == dc and c.gpu == gpu]
        if m.np_ is not None and t.prefill_gpus and t.prefill_gpus[:2] == (dc, gpu):
            use.append(m.np_ * t.prefill_gpus[2])
        if use:
            m.add(f"gpus_{dc}_{gpu}", total(use) <= left)


def define_line_choice(m: Model) -> None:
    """Exactly one line option, leased for every point."""
    m.add("line_choice", total(m.z.values()) == 1)


def line_index(m: Model, value) -> int:
    return max(m.z, key=lambda o: value(m.z[o]))


def counts(m: Model, value) -> dict[str, int]:
    return {k: int(round(value(v))) for k, v in m.n.items()}
