"""Owned capacity priced for the optimizer (the scenario's `owned:` section).

A (datacenter, GPU type) with `count` owned GPUs costs, for `u` GPUs used,

    cost(u) = min(u, count) x owned $/GPU-h + max(u - count, 0) x market $/GPU-h

(owned GPUs first, the rest bought); k lines of an owned SKU likewise, per line-month. The MILP
(model.define_owned) splits the GPUs used into both parts; the search's bounds use the cheaper
of the two prices (`floor_cost`), and the plan reports the split (`split`). Idle owned capacity
is not charged to the plan: the plan's cost is what the capacity it uses counts at.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdd_plan.inputs.pieces import Sites
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.owned import Owned
from pdd_plan.latency.line import transfer
from pdd_plan.perf.instance import Instance

HOURS_PER_MONTH = 8760.0 / 12.0  # as schema.line.LineSKU.cost_per_hour


@dataclass(frozen=True)
class OwnedGPU:
    count: int  # GPUs owned
    price: float  # owned $/GPU-hour (0: sunk)
    market: float  # the scenario's $/GPU-hour for more of them
    available: int  # the datacenter's gpus: for this type (owned included)


@dataclass(frozen=True)
class OwnedPrices:
    """The scenario's `owned:` section priced: (datacenter, GPU type) -> what is owned there,
    SKU name -> (lines owned, owned $/hour per line). Built once, by the top stage."""

    gpus: dict[tuple[str, str], OwnedGPU]
    lines: dict[str, tuple[int, float]]
    declared: bool = False  # the scenario has an `owned:` section (the plan reports a split)

    @classmethod
    def of(cls, o: Owned | None, profiles: dict[str, GPUProfile], sites: Sites) -> OwnedPrices:
        if o is None:
            return cls({}, {})
        owned_gpus = {}
        for g in o.gpus:
            if g.count > 0:
                market = profiles[g.gpu].price.usd_per_gpu_hour
                have = sites.available(g.datacenter).get(g.gpu, 0)
                owned_gpus[g.datacenter, g.gpu] = OwnedGPU(
                    g.count, g.cost_per_gpu_hour, market, have
                )
        per_line = {
            ln.sku: (ln.count, ln.cost_per_month / HOURS_PER_MONTH) for ln in o.lines if ln.count
        }
        return cls(owned_gpus, per_line, True)


NONE = OwnedPrices({}, {})  # nothing owned: every price the market's


def gpus(owned: OwnedPrices) -> dict[tuple[str, str], OwnedGPU]:
    """(datacenter, GPU type) -> what is owned there; empty without an `owned:` section."""
    return owned.gpus


def discount(owned: OwnedPrices) -> float:
    """The most $/hour owned GPUs can take off a fleet's market cost (each owned GPU priced
    under market, in use): cost >= market cost - discount, a bound for the search."""
    return sum(og.count * max(og.market - og.price, 0.0) for og in gpus(owned).values())


def lines(owned: OwnedPrices) -> dict[str, tuple[int, float]]:
    """SKU name -> (lines owned, owned $/hour per line)."""
    return owned.lines


def gpu_cost(og: OwnedGPU | None, used: int, market_cost: float) -> tuple[float, float]:
    """(owned, new) $/hour of `used` GPUs whose market cost is `market_cost`."""
    if og is None:
        return 0.0, market_cost
    mine = min(used, og.count)
    return mine * og.price, max(market_cost - mine * og.market, 0.0) + 0.0


def pool_cost(owned: OwnedPrices, dc: str, inst: Instance, n: int) -> float:
    """$/hour of `n` instances in `dc` on their own (owned GPUs first); exactly the market
    cost where nothing is owned, so plans without `owned:` keep their numbers."""
    og = gpus(owned).get((dc, inst.gpu.name))
    market = n * inst.cost_per_hour
    if og is None:
        return market
    return sum(gpu_cost(og, n * inst.n_gpus, market))


def floor_cost(owned: OwnedPrices, dc: str, gpu: str, n_gpus: int, market_cost: float) -> float:
    """The least $/hour an instance of `n_gpus` GPUs can count at (the cheaper of owned and
    market price): the search's lower bounds stay bounds with owned capacity."""
    og = gpus(owned).get((dc, gpu))
    if og is None or og.price >= og.market:
        return market_cost
    return n_gpus * og.price


def line_split(owned: OwnedPrices, cfg: transfer.LineConfig) -> tuple[float, float]:
    """(owned, new) $/hour of `cfg` (count x SKU): owned lines of the SKU first."""
    mine_sku = lines(owned).get(cfg.sku.name)
    if mine_sku is None:
        return 0.0, cfg.cost_per_hour
    mine = min(cfg.count, mine_sku[0])
    return mine * mine_sku[1], (cfg.count - mine) * cfg.sku.cost_per_hour


def line_cost(owned: OwnedPrices, cfg: transfer.LineConfig) -> float:
    if cfg.sku.name not in lines(owned):
        return cfg.cost_per_hour
    return sum(line_split(owned, cfg))


def split(
    owned: OwnedPrices, used: list[tuple[str, Instance, int]], line: transfer.LineConfig | None
) -> tuple[float, float]:
    """(owned, new) $/hour of a fleet: (datacenter, instance, count) rows and its line."""
    per: dict[tuple[str, str], list[float]] = {}
    for dc, inst, n in used:
        acc = per.setdefault((dc, inst.gpu.name), [0.0, 0.0])
        acc[0] += n * inst.n_gpus
        acc[1] += n * inst.cost_per_hour
    owned_gpus = gpus(owned)
    mine = new = 0.0
    for key, (n_gpus, market) in sorted(per.items()):
        o, b = gpu_cost(owned_gpus.get(key), int(n_gpus), market)
        mine, new = mine + o, new + b
    if line is not None:
        o, b = line_split(owned, line)
        mine, new = mine + o, new + b
    return mine, new
