"""Plan one architecture: enumerate what shapes the TTFT model (main-decode site, prefill GPU,
instance size and pool size or utilization level), solve the fleet MILP for each, keep the best.

The solver sees numbers only (tables.py). The enumeration is bounded: a combination whose
fixed cost plus a lower bound on the rest cannot beat the incumbent is skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import network, pipeline
from ..errors import InfeasibleError
from ..perf import roofline
from ..perf.instance import Instance
from ..resolve import Context
from ..workload.requests import RequestClasses
from . import model, tables
from .tables import DecodeOption, LineOption

QS = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class Caps:
    """Utilization caps; verification by simulation tightens the one that bottlenecks."""

    prefill: float = 0.97  # stability margin of the pooled prefill queue
    line: float = 0.95
    decode: float = 0.9
    line_delay: float = 1.0  # multiplies analytic line transfer times (the PS mean)

    def tightened(self, which: str, used: float, factor: float = 0.9) -> Caps:
        """The cap on `which` set 10% below what the plan used (or below the old cap). For the
        line, first stretch its transfer-time estimate instead: the PS mean misses the tail, and
        a longer estimate lets the plan relay more or buy a line rather than just cap it."""
        if which == "line" and self.line_delay < 2.0:
            return Caps(**{**self.__dict__, "line_delay": self.line_delay / factor**3})
        cap = min(getattr(self, which), used) * factor
        return Caps(**{**self.__dict__, which: cap})


@dataclass
class ArchPlan:
    architecture: str
    rate: float
    prefill: Instance
    prefill_count: int
    pool: pipeline.PrefillPool
    line: network.LineConfig | None
    line_rho: float
    options: list[DecodeOption]
    solution: model.FleetSolution
    times: pipeline.PathTimes
    cost_per_hour: float
    solve_seconds: float = 0.0
    milps: int = 0
    singular_max_output_tokens: int | None = None
    main_dc: str = ""
    tables: tables.FleetTables | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class _Combo:
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


def _main_dcs(ctx: Context, architecture: str) -> list[str]:
    if architecture == "idc_pd":
        return [ctx.prefill_dc]
    pl = ctx.scenario.placement.main_decode
    if pl is not None:
        return [pl]
    others = [d.name for d in ctx.scenario.datacenters if d.name != ctx.prefill_dc]
    return others or [ctx.main_dc]


def _line_opts(ctx: Context, architecture: str, levels: list[float]) -> list[LineOption]:
    return [tables.rdma_option()] if architecture == "idc_pd" else tables.line_options(ctx, levels)


def _decode_sets(ctx, architecture, pg, md_dc, mean_ctx):
    if architecture == "idc_pd":
        return tables.decode_options(ctx, "decode", ctx.prefill_dc, [pg], mean_ctx), []
    mgpus = [g for g, n in ctx.available(md_dc).items() if n > 0]
    md = tables.decode_options(ctx, "main_decode", md_dc, mgpus, mean_ctx)
    rld: list[DecodeOption] = []
    if architecture == "pdd":
        rgpus = [g for g, n in ctx.available(ctx.relay_dc).items() if n > 0]
        rld = tables.decode_options(ctx, "relay_decode", ctx.relay_dc, rgpus, mean_ctx)
    return md, rld


def _gpus_left(ctx: Context) -> dict[tuple[str, str], int]:
    return {(d.name, g): k for d in ctx.scenario.datacenters for g, k in d.gpus.items()}


def _decode_lb_per_rps(cls: RequestClasses, opts: list[DecodeOption], cap: float) -> float:
    """$/hour per req/s that decode costs at the very least (cheapest tokens/s, no rounding).
    Pass main and relay decode together: every output token is decoded on one of them (relay
    decode may be the cheaper per token, and p_rld / p_rld_md move tokens there)."""
    best = min(o.cand.cost_per_hour / (o.cand.tokens_per_s * cap) for o in opts)
    return float(np.dot(cls.weight, cls.output_tokens)) * best


def plan_architecture(
    ctx: Context,
    architecture: str,
    cls: RequestClasses,
    rate: float | None,
    caps: Caps | None = None,
    objective: str = "cost",
    lam: float = 0.0,
    budget: float | None = None,
    duals: bool = False,
    rate_cap: float | None = None,
) -> ArchPlan:
    """The best plan of one architecture.

    rate given: minimum cost (objective 'cost'). rate None: the rate is a variable, and the
    objective is 'goodput' (most req/s, optionally within `budget` $/hour) or 'dinkelbach'
    (most rate - lam * cost: one Dinkelbach step of the best goodput per dollar).
    """
    sc = ctx.scenario
    caps = caps or Caps(decode=sc.search.decode_utilization)
    t0 = time.perf_counter()
    sla = sc.sla
    chunk = sc.search.prefill_chunk_tokens
    mean_ctx = float(np.dot(cls.weight, cls.input_tokens + cls.output_tokens / 2))
    reasons: list[str] = []
    # per prefill option: (relaxation factor needed, reason) for each SLA prefill alone breaks
    floors: list[list[tuple[float, str]]] = []
    reach: dict[float, tuple[float, str]] = {}  # q -> (smallest share over the target, where)
    combos: list[_Combo] = []
    avail_p = ctx.available(ctx.prefill_dc)
    for md_dc in _main_dcs(ctx, architecture):
        for pg in [g for g, n in avail_p.items() if n > 0]:
            md, rld = _decode_sets(ctx, architecture, pg, md_dc, mean_ctx)
            if not md:
                reasons.append(_tpot_reason(ctx, architecture, pg, mean_ctx, md_dc))
                continue
            for pinst in tables.instances(ctx, pg):
                service = pipeline.prefill_service_s(pinst, cls, chunk)
                floors.append(_ttft_floor_reasons(sla, cls, pinst, service))
                es = float(np.dot(cls.weight, service))
                max_n = avail_p.get(pg, 0) // pinst.n_gpus
                if rate is not None:
                    n_min = int(np.floor(rate * es / caps.prefill)) + 1
                    if n_min > max_n:
                        reasons.append(
                            f"GPU availability: prefill needs {n_min} x {pinst.n_gpus} {pg} in "
                            f"{ctx.prefill_dc}, {avail_p.get(pg, 0)} available"
                        )
                        continue
                    for n_p in range(n_min, min(n_min + sc.search.max_prefill_extra, max_n + 1)):
                        combos.append(
                            _Combo(
                                md_dc,
                                pinst,
                                service,
                                n_p,
                                n_p,
                                rate * es / n_p,
                                n_p * pinst.cost_per_hour,
                                md,
                                rld,
                            )
                        )
                else:
                    for lo, hi in _buckets(max_n):
                        for lv in sorted(
                            {min(x, caps.prefill) for x in sc.search.utilization_levels}
                        ):
                            combos.append(
                                _Combo(
                                    md_dc,
                                    pinst,
                                    service,
                                    lo,
                                    hi,
                                    lv,
                                    lo * pinst.cost_per_hour,
                                    md,
                                    rld,
                                )
                            )
    if floors and all(floors):  # every prefill option alone breaks an SLA: no hardware here helps
        # report the option that needs the least relaxation: only its floor is a lower bound on
        # what any prefill option could meet
        reasons += [why for _, why in min(floors, key=lambda f: max(x for x, _ in f))]
    if not combos:
        raise InfeasibleError(_diagnose(ctx, architecture, reasons))
    best: ArchPlan | None = None
    best_key = None
    milps = 0
    line_cost_lb = (
        0.0
        if architecture == "idc_pd"
        else min((ln.cost_per_hour for ln in ctx.lines), default=0.0)
    )
    combos.sort(key=lambda c: c.fixed_cost)
    line_short = False
    for cb in combos:
        lb_cost = cb.fixed_cost + line_cost_lb
        if rate is not None:
            lb_cost += rate * _decode_lb_per_rps(cls, cb.md + cb.rld, caps.decode)
            if best is not None and lb_cost >= best.cost_per_hour * (1 - 1e-9):
                continue  # bound: cannot beat the incumbent
        else:
            es = float(np.dot(cls.weight, cb.service))
            r_ub = cb.rho * cb.n_hi / es
            # every req/s costs at least its prefill share and the cheapest decode tokens
            per_rps = es / cb.rho * cb.pinst.cost_per_hour + _decode_lb_per_rps(
                cls, cb.md + cb.rld, caps.decode
            )
            r_lo = min(r_ub, cb.rho * cb.n_lo / es)
            if budget is not None:
                r_ub = min(r_ub, max(budget - line_cost_lb, 0.0) / per_rps)
            if (
                best is not None
                and _upper_bound(objective, lam, r_ub, r_lo, per_rps, line_cost_lb)
                <= best_key + 1e-9
            ):
                continue
        t = _tables(ctx, architecture, cls, rate, cb, caps, budget, rate_cap)
        if t is None:
            # fixed rate: no line option carries the bytes under its cap (the same for every
            # combination); say so rather than fall through to a GPU-availability guess
            if rate is not None and architecture != "idc_pd" and not line_short:
                line_short = True
                reasons.append(_line_reason(ctx, cls, rate, caps))
            continue
        milps += 1
        sol = model.solve(t, objective if rate is None else "cost", lam, sc.search.time_limit_s)
        if sol is None:
            _track_reach(reach, t, cb)
            continue
        key = sol.objective if rate is None else -sol.cost_per_hour
        if best is None or key > best_key + 1e-9:
            best_key = key
            best = _arch_plan(ctx, architecture, cls, cb, t, sol, sol.rate_rps)
    if best is None:
        for q, (share, where) in sorted(reach.items()):
            if share > 1 - q + 1e-9:
                s_q = sla.ttft_p90_s if q == 0.9 else sla.ttft_p99_s
                reasons.append(
                    f"TTFT P{round(q * 100)} <= {s_q:g} s is out of reach: at best {share * 100:.1f}% of requests "
                    f"would exceed it ({where}); relax sla.ttft_p{round(q * 100)}_s, allow more or faster lines "
                    f"(link.candidates, link.max_lines), or add prefill GPUs"
                )
        if not reasons:
            reasons.append(
                "GPU availability: decode and relay pools that meet the TPOT target do not fit in the GPUs "
                "the datacenters list (add GPUs or lower workload.rate_rps)"
            )
        raise InfeasibleError(_diagnose(ctx, architecture, reasons))
    if duals:
        sol = model.solve(
            best.tables,
            objective if rate is None else "cost",
            lam,
            sc.search.time_limit_s,
            duals=True,
        )
        if sol is not None:
            best.solution.shadow_prices = sol.shadow_prices
    best.solve_seconds = time.perf_counter() - t0
    best.milps = milps
    return best


def _upper_bound(
    objective: str, lam: float, r_ub: float, r_lo: float, per_rps: float, fixed_lb: float
) -> float:
    """The best objective a combination could reach: rate at most r_ub; cost at least
    per_rps x rate + fixed_lb (the pool's smallest size already sets r_lo's worth of prefill)."""
    if objective == "goodput":
        return r_ub
    slope = 1.0 - lam * per_rps
    r = r_ub if slope > 0 else r_lo
    return r * slope - lam * fixed_lb


def _buckets(max_n: int) -> list[tuple[int, int]]:
    """Prefill pool-size ranges for a variable rate: [1], [2], [3, 4], [5, 8], ... The wait is
    computed at the range's smallest size (Erlang C falls as servers are added at a fixed
    utilization), so each range is conservative."""
    out, lo = [], 1
    while lo <= max_n:
        hi = min(max(lo, 2 * (lo - 1)), max_n) if lo > 2 else lo
        out.append((lo, hi))
        lo = hi + 1
    return out


def _tables(
    ctx, architecture, cls, rate, cb: _Combo, caps: Caps, budget, rate_cap=None
) -> tables.FleetTables | None:
    sc = ctx.scenario
    es = float(np.dot(cls.weight, cb.service))
    if rate is not None:
        pool = pipeline.PrefillPool(cb.pinst, cb.n_lo, cb.service, rate, cls.weight)
        xb = network.line_bytes(ctx.model, cls.input_tokens, cls.hit_d, sc.policy.drc)
        levels = None
    else:
        pool = pipeline.PrefillPool(
            cb.pinst, cb.n_lo, cb.service, cb.rho * cb.n_lo / es, cls.weight
        )
        xb = network.line_bytes(ctx.model, cls.input_tokens, cls.hit_d, sc.policy.drc)
        levels = [x for x in sc.search.utilization_levels if x <= caps.line]
    if architecture == "idc_pd":
        lines = [tables.rdma_option()]
    elif rate is not None:
        # fixed rate: each SKU x count at the utilization its bytes would cause if every
        # request crossed (an upper bound: singular requests that end on relay decode do not)
        lines = []
        load = rate * float(np.dot(cls.weight, xb))
        for sku in ctx.lines:
            for k in range(1, (sc.link.max_lines if sc.link else 0) + 1):
                cfg = network.LineConfig(sku, k)
                rho = load / cfg.capacity_bytes_s
                if rho < caps.line:
                    lines.append(
                        LineOption(
                            f"{k}x{sku.name}",
                            cfg,
                            min(
                                max(rho, 1e-6) * (1 + 1e-6) + 1e-9, caps.line
                            ),  # slack for rounding
                            cfg.cost_per_hour,
                            cfg.capacity_bytes_s,
                        )
                    )
    else:
        lines = _line_opts(ctx, architecture, levels)
    if not lines:
        return None
    paths = [
        tables.path_table(
            ctx, architecture, cls, pool, cb.service, cb.md, cb.rld, ln, caps.line_delay
        )
        for ln in lines
    ]
    left = _gpus_left(ctx)
    pg = cb.pinst.gpu.name
    variable = rate is None
    if not variable:
        left[(ctx.prefill_dc, pg)] -= cb.n_lo * cb.pinst.n_gpus
    return tables.FleetTables(
        weight=cls.weight,
        line_bytes=xb,
        kv_bytes=tables.kv_hold_bytes(ctx, cls),
        md=[o.cand for o in cb.md],
        rld=[o.cand for o in cb.rld],
        lines=lines,
        paths=paths,
        gpus_left=left,
        decode_cap=caps.decode,
        rate_rps=rate,
        rate_max=min(cb.rho * cb.n_hi / es, rate_cap or float("inf")) if variable else 0.0,
        prefill_cost_per_hour=0.0 if variable else cb.fixed_cost,
        prefill_rate_per_instance=cb.rho / es if variable else 0.0,
        prefill_instances=(cb.n_lo, cb.n_hi),
        prefill_gpus=(ctx.prefill_dc, pg, cb.pinst.n_gpus),
        prefill_instance_cost=cb.pinst.cost_per_hour,
        budget_per_hour=budget,
        meta={"md_dc": cb.md_dc, "pool": pool, "combo": cb},
    )


def _arch_plan(
    ctx, architecture, cls, cb: _Combo, t: tables.FleetTables, sol: model.FleetSolution, rate: float
) -> ArchPlan:
    ln = t.lines[sol.line_index]
    n_p = sol.prefill_count if sol.prefill_count is not None else cb.n_lo
    pool = pipeline.PrefillPool(cb.pinst, n_p, cb.service, rate, cls.weight)
    crossing = sum(sol.flows[p] for p in sol.flows if t.paths[sol.line_index].crosses_line[p])
    rho_l = (
        float(np.dot(crossing, t.line_bytes) / ln.capacity_bytes_s)
        if np.isfinite(ln.capacity_bytes_s)
        else 0.0
    )
    return ArchPlan(
        architecture=architecture,
        rate=rate,
        prefill=cb.pinst,
        prefill_count=n_p,
        pool=pool,
        line=ln.config,
        line_rho=rho_l,
        options=cb.md + cb.rld,
        solution=sol,
        times=t.paths[sol.line_index].times,
        cost_per_hour=sol.cost_per_hour,
        singular_max_output_tokens=ctx.scenario.policy.singular_max_output_tokens
        if architecture == "pdd"
        else None,
        main_dc=cb.md_dc,
        tables=t,
        extra={"line_level": ln.level},
    )


# ------------------------------------------------------------------ diagnosis


def _ttft_floor_reasons(
    sla, cls: RequestClasses, pinst: Instance, service: np.ndarray
) -> list[tuple[float, str]]:
    """An SLA no queueing can explain: prefill alone runs past the target for too many requests.
    Each reason comes with the factor the target would have to grow by (need / target)."""
    out = []
    for q, s in ((0.9, sla.ttft_p90_s), (0.99, sla.ttft_p99_s)):
        over = float(np.dot(cls.weight, service > s))
        if over > 1 - q + 1e-9:
            order = np.argsort(service)
            cum = np.cumsum(cls.weight[order])
            need = float(service[order][min(np.searchsorted(cum, q - 1e-12), len(cum) - 1)])
            need = float(np.ceil(need * 100 - 1e-9) / 100)  # shown to 2 decimals: round up
            out.append(
                (
                    need / s,
                    f"TTFT P{round(q * 100)} <= {s:g} s cannot be met: prefill alone takes up to "
                    f"{float(service.max()):.2f} s on {pinst.label} and {over * 100:.1f}% of requests exceed "
                    f"{s:g} s with no queueing at all (relax sla.ttft_p{round(q * 100)}_s to at least {need:.2f} s, "
                    f"or use faster prefill GPUs)",
                )
            )
    return out


def _tpot_reason(
    ctx: Context, architecture: str, prefill_gpu: str, context: float, md_dc: str
) -> str:
    """Why no decode instance qualifies: the fastest single-request step against the TPOT target."""
    dc = ctx.prefill_dc if architecture == "idc_pd" else md_dc
    gpus = (
        [prefill_gpu]
        if architecture == "idc_pd"
        else [g for g, n in ctx.available(dc).items() if n > 0]
    )
    steps = [
        (roofline.decode_step(i, 1, context).total_s, i.label)
        for g in gpus
        for i in tables.instances(ctx, g)
        if i.n_gpus <= ctx.available(dc).get(g, 0)
    ]
    if not steps:
        return f"GPU availability: the model fits on no instance of {', '.join(gpus)} within the GPUs available in {dc}"
    t, label = min(steps)
    return (
        f"TPOT {ctx.scenario.sla.tpot_ms:g} ms is below the fastest decode step ({t * 1e3:.1f} ms on {label} "
        f"at {context:,.0f} tokens of context) (relax sla.tpot_ms above {t * 1e3:.1f})"
    )


def _line_reason(ctx: Context, cls: RequestClasses, rate: float, caps: Caps) -> str:
    """Why no line option qualifies at a fixed rate: the KV bytes/s against the biggest option."""
    sc = ctx.scenario
    xb = network.line_bytes(ctx.model, cls.input_tokens, cls.hit_d, sc.policy.drc)
    load = rate * float(np.dot(cls.weight, xb))  # bytes/s if every request crosses
    mx = sc.link.max_lines if sc.link else 0
    if not ctx.lines or mx < 1:
        return (
            "line capacity: no line SKU to carry KV between the datacenters (set link.candidates)"
        )
    sku = max(ctx.lines, key=lambda s: s.bytes_per_s)
    cap = network.LineConfig(sku, mx).capacity_bytes_s * caps.line
    need = int(np.floor(load / (sku.bytes_per_s * caps.line))) + 1
    r_max = rate * cap / load
    step = 10.0 ** (np.floor(np.log10(r_max)) - 2)
    r_ok = float(f"{np.floor(r_max * (1 - 1e-9) / step) * step:.3g}")  # under, 3 digits, down
    return (
        f"line capacity: {rate:g} req/s send {load * 8 / 1e9:.3g} Gbps of KV across the line, but "
        f"the biggest option ({mx} x {sku.name}: link.max_lines x the fastest candidate) carries "
        f"{cap * 8 / 1e9:.3g} Gbps at the {caps.line:.0%} utilization cap (raise link.max_lines "
        f"to {need} x {sku.name}, add a faster SKU to link.candidates, or lower "
        f"workload.rate_rps to {r_ok:g})"
    )


def _track_reach(reach: dict, t: tables.FleetTables, cb: _Combo) -> None:
    """Remember the smallest share of requests over each TTFT target any routing could reach."""
    for o, pt in enumerate(t.paths):
        for q in tables.QUANTILES:
            best = np.min(
                np.vstack([np.where(pt.allowed[p], pt.miss[q][p], 1.0) for p in pt.allowed]), axis=0
            )
            share = float(np.dot(t.weight, best))
            where = f"prefill {cb.n_lo} x {cb.pinst.label}, {t.lines[o].key}"
            if q not in reach or share < reach[q][0]:
                reach[q] = (share, where)


def _reason_rank(r: str) -> int:
    # SLA impossibilities first (no hardware helps), then TPOT, then the line (it rejects every
    # combination when it binds), then availability
    if r.startswith("TTFT"):
        return 0
    if r.startswith("TPOT"):
        return 1
    return 2 if r.startswith("line capacity") else 3


def _diagnose(ctx: Context, architecture: str, reasons: list[str]) -> str:
    sc = ctx.scenario
    msg = f"{architecture}: no plan meets the scenario"
    if reasons:
        return f"{msg}: {sorted(reasons, key=_reason_rank)[0]}"
    return (
        f"{msg}: TTFT P90 <= {sc.sla.ttft_p90_s} s / P99 <= {sc.sla.ttft_p99_s} s cannot be met with the "
        f"available GPUs and lines (relax sla.ttft_p90_s/ttft_p99_s, lower workload.rate_rps, or add GPUs)"
    )
