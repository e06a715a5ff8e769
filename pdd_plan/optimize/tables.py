"""Plain tables the MILP reads: decode candidates, line options, and per-class path numbers.

Everything the solver sees is computed here, outside it, from the perf, network and pipeline
models; the MILP itself (`model.py`) only combines numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pdd_plan.architectures import (
    P_MD,
    P_RLD,
    P_RLD_MD,
    PATH_CROSSES_LINE,
    RELAY_PATHS,
    Architecture,
)
from pdd_plan.inputs.pieces import Sites
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.scenario import SLA, Policy
from pdd_plan.latency import paths as latency_paths
from pdd_plan.latency import ttft
from pdd_plan.latency.line import transfer
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import owned as owned_prices
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Catalog
from pdd_plan.perf import layers as perf_arch
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import Instance, instance_key
from pdd_plan.workload.requests import RequestClasses

QUANTILES = (0.9, 0.99)


@dataclass(frozen=True)
class DecodeCandidate:
    key: str  # unique label, e.g. "main_decode:dc-b:16xh200 tp16 dp16 ep16"
    role: str  # relay_decode | main_decode | decode
    datacenter: str
    gpu: str
    gpus: int  # per instance
    cost_per_hour: float
    tokens_per_s: float  # output tokens/s at the TPOT target (full batch)
    kv_pool_bytes: float
    step_s: float  # step time at that batch


@dataclass(frozen=True)
class DecodeOption:
    cand: DecodeCandidate
    inst: Instance


@dataclass(frozen=True)
class LineOption:
    """One way to connect the prefill datacenter to main decode: a SKU, a count, and the
    utilization level at which transfer times were computed (the cap the MILP enforces).
    ``capacity_bytes_s`` is what the line and its connection pool can carry together."""

    key: str
    config: transfer.LineConfig | None  # None: RDMA inside one datacenter (IDC-PD)
    level: float  # utilization cap
    cost_per_hour: float
    capacity_bytes_s: float


@dataclass
class PathTable:
    """Per line option o, per path, per class: miss probabilities and decode splits."""

    allowed: dict[str, np.ndarray]  # path -> bool (classes)
    miss: dict[float, dict[str, np.ndarray]]  # q -> path -> P(TTFT > SLA_q) per class
    md_tokens: dict[str, np.ndarray]
    rld_tokens: dict[str, np.ndarray]
    crosses_line: dict[str, bool]
    times: latency_paths.PathTimes  # per class: the means of `fine` over each class's strata
    fine: latency_paths.PathTimes | None = None  # per stratum of the classes (None: no strata)


@dataclass
class FleetTables:
    """One MILP: fixed prefill pool (or its level), decode candidates, line options, classes."""

    weight: np.ndarray
    line_bytes: np.ndarray  # per class
    kv_bytes: np.ndarray  # per class, bytes a request holds while decoding
    md: list[DecodeCandidate]
    rld: list[DecodeCandidate]
    lines: list[LineOption]
    paths: list[PathTable]  # one per line option
    gpus_left: dict[tuple[str, str], int]  # (datacenter, gpu) -> GPUs free for decode pools
    decode_cap: float = 0.9
    rate_rps: float | None = None  # None: the rate is a variable
    rate_max: float = 0.0  # upper bound on the rate when it is a variable
    prefill_cost_per_hour: float = 0.0  # fixed part (the prefill pool)
    prefill_rate_per_instance: float = (
        0.0  # variable-rate mode: req/s one instance takes at its cap
    )
    prefill_instances: tuple[int, int] = (0, 0)  # variable-rate mode: allowed count range
    prefill_gpus: tuple[str, str, int] | None = None  # (datacenter, gpu, gpus per instance)
    prefill_instance_cost: float = 0.0
    budget_per_hour: float | None = None
    # (datacenter, gpu) -> owned GPUs there and their price (`owned:`; empty: none)
    owned: dict[tuple[str, str], owned_prices.OwnedGPU] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


def instances(catalog: Catalog, gpu: str) -> list[Instance]:
    return catalog.instances(gpu)


def decode_options(
    catalog: Catalog,
    sites: Sites,
    sla: SLA,
    role: str,
    dc: str,
    gpus: list[str],
    context_tokens: float,
) -> list[DecodeOption]:
    """Decode candidates: every fitting instance size of every GPU type, at the TPOT target."""
    tpot = sla.tpot_ms / 1e3
    out = []
    for gname in gpus:
        have = sites.available(dc).get(gname, 0)
        for inst in instances(catalog, gname):
            if inst.n_gpus > have:
                continue
            b, step = _max_batch(inst, context_tokens, tpot)
            if b < 1:
                continue
            key = f"{role}:{dc}:{inst.label}"
            cand = DecodeCandidate(
                key,
                role,
                dc,
                gname,
                inst.n_gpus,
                inst.cost_per_hour,
                b / step,
                inst.kv_pool_bytes,
                step,
            )
            out.append(DecodeOption(cand, inst))
    return out


_BATCH_CACHE: dict[tuple, tuple[ModelProfile, tuple[int, float]]] = {}


def _max_batch(inst: Instance, context_tokens: float, tpot_s: float) -> tuple[int, float]:
    """roofline.max_batch_for_tpot (a bisection of decode steps), memoized on the instance's
    fields and its GPU's perf values: the catalog builds its instances anew for every
    architecture and prefill GPU, and a regime map for every cell, which ask for the same
    decode candidates."""
    args = (context_tokens, tpot_s)
    key = (instance_key(inst), *((type(a), float(a)) for a in args))
    hit = _BATCH_CACHE.get(key)
    # the entry keeps its model profile alive, so its id stays unique
    if hit is None or hit[0] is not inst.model:
        if len(_BATCH_CACHE) > 4096:
            _BATCH_CACHE.clear()
        hit = (inst.model, roofline.max_batch_for_tpot(inst, context_tokens, tpot_s))
        _BATCH_CACHE[key] = hit
    return hit[1]


def line_options(
    skus: list[LineSKU], max_lines: int, owned: owned_prices.OwnedPrices, levels: list[float]
) -> list[LineOption]:
    """Every candidate SKU x count x utilization level."""
    out = []
    for sku in skus:
        for k in range(1, max_lines + 1):
            cfg = transfer.LineConfig(sku, k)
            for lv in levels:
                cost = owned_prices.line_cost(owned, cfg)  # owned lines of the SKU first
                out.append(
                    LineOption(f"{k}x{sku.name}@{lv:.3f}", cfg, lv, cost, cfg.usable_bytes_s)
                )
    return out


def line_options_at_load(
    skus: list[LineSKU],
    max_lines: int,
    owned: owned_prices.OwnedPrices,
    load_bytes_s: float,
    cap: float,
) -> list[LineOption]:
    """Fixed rate: every SKU x count under `cap` at the utilization `load_bytes_s` would cause
    (an upper bound on the load: singular requests that end on relay decode do not cross)."""
    out = []
    for sku in skus:
        for k in range(1, max_lines + 1):
            cfg = transfer.LineConfig(sku, k)
            rho = load_bytes_s / cfg.usable_bytes_s  # the pool may carry less than the line
            if rho < cap:
                level = min(max(rho, 1e-6) * (1 + 1e-6) + 1e-9, cap)  # slack for rounding
                cost = owned_prices.line_cost(owned, cfg)  # owned lines of the SKU first
                out.append(LineOption(f"{k}x{sku.name}", cfg, level, cost, cfg.usable_bytes_s))
    return out


def rdma_option() -> LineOption:
    return LineOption("rdma", None, 1.0, 0.0, float("inf"))


def _relay_paths(spec: Architecture, rld: list[DecodeOption]) -> tuple[str, ...]:
    """The relay paths the router may use: the spec's, when a relay pool exists."""
    return tuple(p for p in RELAY_PATHS if p in spec.paths) if rld else ()


def relay_wanted(direct_miss: dict[float, np.ndarray]) -> np.ndarray:
    """The routing rule (`policy.router: plan`): relay a class when its direct path breaks
    the SLA's share at a percentile it states: more than 10% of its requests over the P90
    target, or 1% over the P99 (`direct_miss`: quantile -> per class, P_MD's miss chance with
    its line wait, over the class's strata). A faster line only lowers those chances, so it
    closes the gate only for a class that then meets both shares on its own: it never takes a
    relay path from a class that needs one (a rule on the class's mean time did, where the
    class's long strata still missed)."""
    return np.logical_or.reduce([direct_miss[q] > (1.0 - q) * (1 + 1e-9) for q in direct_miss])


def _hit_threshold_paths(
    policy: Policy, hit_p: np.ndarray, singular: np.ndarray, relay: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """`policy.router: hit_threshold` (the PDD report's rule): one path per class, no choice
    left to the solver. A class at or below the threshold relays (finishing near when it is
    singular and the architecture lets it), every other class goes P -> MD."""
    low = np.asarray(hit_p, dtype=float) <= policy.relay_hit_threshold.at_or_below
    near = singular & low if P_RLD in relay else np.zeros_like(low)
    out = {P_MD: ~low, P_RLD_MD: low & ~near}
    if P_RLD in relay:
        out[P_RLD] = near
    return out


def fine_times(
    policy: Policy,
    prefill_chunk_tokens: int,
    classes: RequestClasses,
    pool: prefill_pool.PrefillPool,
    service_s: np.ndarray,
    md: list[DecodeOption],
    rld: list[DecodeOption],
    line: LineOption,
    caps: Caps,
    line_weight: np.ndarray | None = None,
) -> latency_paths.PathTimes:
    """Path times per stratum of `classes` (per class when it has none), the line at
    `line.level`, its queue of the strata crossing it at `line_weight` (default: all)."""
    md_step = max(o.cand.step_s for o in md)
    md_inst = min(md, key=lambda o: o.cand.cost_per_hour / o.cand.tokens_per_s).inst
    rld_inst = rld[0].inst if rld else None
    rld_step = max((o.cand.step_s for o in rld), default=0.0)
    if classes.fine is not classes:
        service_s = prefill_pool.prefill_strata_service_s(pool.inst, classes, prefill_chunk_tokens)
    return latency_paths.path_times(
        classes.fine,
        service_s,
        pool.inst,
        md_inst,
        md_step,
        line.config,
        line.level,
        rld_inst,
        rld_step,
        policy,
        caps.line_delay,
        pool.departure_ca2,
        pool,
        md_batch=_batch(md, md_inst),
        chunk=prefill_chunk_tokens,
        line_weight=line_weight,
    )


def _batch(md: list[DecodeOption], inst) -> float:
    """The running batch of main decode's chosen instance (its TPOT-target batch)."""
    c = next(o.cand for o in md if o.inst is inst)
    return c.tokens_per_s * c.step_s


def path_table(
    sla: SLA,
    policy: Policy,
    prefill_chunk_tokens: int,
    spec: Architecture,
    classes: RequestClasses,
    pool: prefill_pool.PrefillPool,
    service_s: np.ndarray,
    md: list[DecodeOption],
    rld: list[DecodeOption],
    line: LineOption,
    caps: Caps,
) -> PathTable:
    """Per class and path of `spec`: which requests may take it, and their TTFT miss chances.

    Times and misses are computed on the classes' strata and averaged over each class: a class
    misses its TTFT target for the share of its requests that do, not all or nothing at its mean
    request (a rare long class would otherwise push every plan onto faster GPUs)."""
    fine = classes.fine
    ft = fine_times(policy, prefill_chunk_tokens, classes, pool, service_s, md, rld, line, caps)
    times = ft.class_mean(classes)
    n = len(classes)
    # no line (every role in one datacenter): nothing to relay around
    relay = _relay_paths(spec, rld) if line.config is not None else ()
    slas = (sla.ttft_p90_s, sla.ttft_p99_s)
    paths = (P_MD, *relay)
    fixed = {p: ft.ttft_fixed_s[p] for p in paths}
    waits = [{p: f(p) for p in paths} for f in (ft.line_wait, ft.line_wait_var, ft.line_wait_atom)]
    rows = ttft.miss_probabilities(fixed, pool, slas, *waits)
    every = {q: {p: classes.class_mean(row[p]) for p in paths} for q, row in zip(QUANTILES, rows)}
    allowed = {P_MD: np.ones(n, bool)}
    if relay:
        lim = policy.singular_max_output_tokens
        singular = classes.output_tokens <= (lim if lim is not None else -1)
        if policy.router == "hit_threshold":
            allowed = _hit_threshold_paths(policy, classes.hit_p, singular, relay)
        else:
            wants = relay_wanted({q: every[q][P_MD] for q in QUANTILES})
            for p in relay:
                allowed[p] = wants & singular if p == P_RLD else wants
    miss = {q: {p: every[q][p] for p in allowed} for q in QUANTILES}
    return PathTable(
        allowed=allowed,
        miss=miss,
        md_tokens={p: times.md_tokens[p] for p in allowed},
        rld_tokens={p: times.rld_tokens[p] for p in allowed},
        crosses_line=dict(PATH_CROSSES_LINE),
        times=times,
        fine=ft if fine is not classes else None,
    )


def kv_hold_bytes(model: ModelProfile, classes: RequestClasses) -> np.ndarray:
    return np.asarray(perf_arch.kv_bytes(model, classes.input_tokens + classes.output_tokens / 2))
