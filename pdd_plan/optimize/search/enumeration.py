"""What both drivers enumerate: main-decode sites (:meth:`inputs.pieces.Sites.main_dcs`), prefill
instances with their decode sets (`PrefillChoice`), the combinations (`Combo`) that fix the MILP's context, and the
`FleetTables` of one combination.

Fixed and free rate differ only in how a prefill choice becomes combinations (pool sizes at a
rate, or size ranges x utilization levels) and in what the MILP decides; see fixed_rate.py and
free_rate.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import numpy as np

from pdd_plan.architectures import Architecture
from pdd_plan.common import limits
from pdd_plan.inputs.pieces import Sites
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.scenario import SLA, Policy
from pdd_plan.latency.line import transfer
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import diagnosis, owned, tables
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Catalog, Problem
from pdd_plan.optimize.tables import DecodeOption, LineOption
from pdd_plan.perf.instance import Instance
from pdd_plan.workload.requests import RequestClasses


@dataclass(frozen=True)
class PrefillChoice:
    """A main-decode site, a prefill instance (its service times) and the decode options."""

    md_dc: str
    pinst: Instance
    service: np.ndarray
    mean_service_s: float
    max_n: int  # prefill instances the prefill datacenter's GPUs hold
    md: list[DecodeOption]
    rld: list[DecodeOption]


@dataclass
class Combo:
    """One enumerated setting: the MILP's fixed context and a bound on its cost."""

    md_dc: str
    pinst: Instance
    service: np.ndarray
    n_lo: int
    n_hi: int
    rho: float  # prefill utilization (fixed rate: exact; variable rate: the cap)
    fixed_cost: float
    md: list[DecodeOption]
    rld: list[DecodeOption]

    @property
    def label(self) -> str:
        return f"prefill {self.n_lo} x {self.pinst.label}"


def _gpus_in(sites: Sites, dc: str) -> list[str]:
    return [g for g, n in sites.available(dc).items() if n > 0]


def decode_sets(
    sites: Sites,
    catalog: Catalog,
    sla: SLA,
    spec: Architecture,
    pg: str,
    md_dc: str,
    mean_ctx: float,
) -> tuple[list[DecodeOption], list[DecodeOption]]:
    """Decode options of the pool every request lands on, and of relay decode (if any)."""
    opts = partial(tables.decode_options, catalog, sites, sla)
    if spec.decode_role == "decode":  # decode beside prefill, on its GPU type
        return opts("decode", sites.prefill, [pg], mean_ctx), []
    md = opts("main_decode", md_dc, _gpus_in(sites, md_dc), mean_ctx)
    rld: list[DecodeOption] = []
    if spec.relays:
        rld = opts("relay_decode", sites.relay, _gpus_in(sites, sites.relay), mean_ctx)
    return md, rld


def mean_context(classes: RequestClasses) -> float:
    """Tokens of context a decoding request holds on average (input plus half its output)."""
    return float(np.dot(classes.weight, classes.input_tokens + classes.output_tokens / 2))


def prefill_choices(
    sites: Sites,
    catalog: Catalog,
    sla: SLA,
    spec: Architecture,
    classes: RequestClasses,
    findings: diagnosis.Findings,
) -> Iterator[PrefillChoice]:
    """Every main-decode site x prefill GPU x instance size. Notes in `findings`, in order,
    each prefill GPU with no decode option, and (at the end) every instance tried, whose TTFT
    floors explain an empty answer when every one breaks the SLA."""
    chunk = catalog.prefill_chunk_tokens
    mean_ctx = mean_context(classes)
    avail_p = sites.available(sites.prefill)
    seen = []
    for md_dc in sites.main_dcs(spec):
        for pg in [g for g, n in avail_p.items() if n > 0]:
            md, rld = decode_sets(sites, catalog, sla, spec, pg, md_dc, mean_ctx)
            if not md:
                findings.no_decode(pg, mean_ctx, md_dc)
                continue
            for pinst in tables.instances(catalog, pg):
                service = prefill_pool.prefill_service_s(pinst, classes, chunk)
                seen.append((pinst, service))
                es = float(np.dot(classes.weight, service))
                max_n = avail_p.get(pg, 0) // pinst.n_gpus
                yield PrefillChoice(md_dc, pinst, service, es, max_n, md, rld)
    findings.prefill_instances(seen)


def gpus_left(sites: Sites) -> dict[tuple[str, str], int]:
    return {(dc, g): k for dc, gpus in sites.gpus.items() for g, k in gpus.items()}


def decode_lb_per_rps(
    classes: RequestClasses,
    opts: list[DecodeOption],
    cap: float,
    owned_prices: owned.OwnedPrices | None = None,
) -> float:
    """$/hour per req/s that decode costs at the very least (cheapest tokens/s, no rounding,
    with `owned_prices`, owned GPUs at the cheaper of their two prices). Pass main and relay decode together: every
    output token is decoded on one of them (relay decode may be the cheaper per token, and
    p_rld / p_rld_md move tokens there)."""
    best = min(
        (floor_cost(owned_prices, o) if owned_prices is not None else o.cand.cost_per_hour)
        / (o.cand.tokens_per_s * cap)
        for o in opts
    )
    return float(np.dot(classes.weight, classes.output_tokens)) * best


def floor_cost(owned_prices: owned.OwnedPrices, o: DecodeOption) -> float:
    c = o.cand
    return owned.floor_cost(owned_prices, c.datacenter, c.gpu, c.gpus, c.cost_per_hour)


def line_cost_lb(owned_prices: owned.OwnedPrices, skus: list[LineSKU], spec: Architecture) -> float:
    """$/hour any plan pays for the line at least (none without one; owned lines first)."""
    if not spec.crosses_line:
        return 0.0
    cfgs = (transfer.LineConfig(s, 1) for s in skus)
    return min((owned.line_cost(owned_prices, c) for c in cfgs), default=0.0)


@dataclass(frozen=True)
class Shared:
    """Per architecture solve: what every combination's tables share (built once), and the
    pieces of the problem the tables stage reads (sites, SLA, policy, chunk, owned prices)."""

    spec: Architecture
    classes: RequestClasses
    caps: Caps
    line_bytes: np.ndarray
    kv_bytes: np.ndarray
    sites: Sites
    sla: SLA
    policy: Policy
    prefill_chunk_tokens: int
    owned: owned.OwnedPrices

    @classmethod
    def of(cls, pb: Problem, spec: Architecture, classes: RequestClasses, caps: Caps) -> Shared:
        xb = transfer.line_bytes(pb.model, classes.input_tokens, classes.hit_d, pb.policy.drc)
        kv = tables.kv_hold_bytes(pb.model, classes)
        chunk = pb.catalog.prefill_chunk_tokens
        return cls(spec, classes, caps, xb, kv, pb.sites, pb.sla, pb.policy, chunk, pb.owned)


def fleet_tables(
    sh: Shared,
    cb: Combo,
    pool: prefill_pool.PrefillPool,
    lines: list[LineOption],
    rate: float | None,
    budget: float | None = None,
    rate_cap: float | None = None,
) -> tables.FleetTables:
    """The MILP of one combination: `rate` None makes the rate (and the prefill pool size within
    the combination's range) variables."""
    cls = sh.classes
    paths = []
    rules = (sh.sla, sh.policy, sh.prefill_chunk_tokens)
    for ln in lines:  # one TTFT table per line option: the search's deadline holds between them
        limits.check_deadline()
        paths.append(
            tables.path_table(*rules, sh.spec, cls, pool, cb.service, cb.md, cb.rld, ln, sh.caps)
        )
    left = gpus_left(sh.sites)
    pg = cb.pinst.gpu.name
    variable = rate is None
    es = float(np.dot(cls.weight, cb.service))
    if not variable:
        left[(sh.sites.prefill, pg)] -= cb.n_lo * cb.pinst.n_gpus
    return tables.FleetTables(
        weight=cls.weight,
        line_bytes=sh.line_bytes,
        kv_bytes=sh.kv_bytes,
        md=[o.cand for o in cb.md],
        rld=[o.cand for o in cb.rld],
        lines=lines,
        paths=paths,
        gpus_left=left,
        decode_cap=sh.caps.decode,
        rate_rps=rate,
        rate_max=min(cb.rho * cb.n_hi / es, rate_cap or float("inf")) if variable else 0.0,
        # at market price: the MILP counts owned GPUs (prefill's included) in define_owned
        prefill_cost_per_hour=0.0 if variable else cb.n_lo * cb.pinst.cost_per_hour,
        prefill_rate_per_instance=cb.rho / es if variable else 0.0,
        prefill_instances=(cb.n_lo, cb.n_hi),
        prefill_gpus=(sh.sites.prefill, pg, cb.pinst.n_gpus),
        prefill_instance_cost=cb.pinst.cost_per_hour,
        budget_per_hour=budget,
        owned=owned.gpus(sh.owned),
        meta={"md_dc": cb.md_dc, "pool": pool, "combo": cb},
    )


def one_datacenter(sites: Sites, cb: Combo) -> bool:
    """Prefill and main decode in one datacenter (relay decode sits by prefill): the KV moves
    over RDMA, so the plan leases no line."""
    return cb.md_dc == sites.prefill
