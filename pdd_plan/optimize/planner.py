"""Plan each architecture: enumerate the prefill pool and the line, solve the decode MILP for each,
keep the cheapest; then measure the plan (percentiles, shares) and compare architectures."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .. import network, pipeline
from ..errors import InfeasibleError
from ..perf import arch as perf_arch
from ..perf import roofline
from ..perf.instance import Instance, parallelism_candidates
from ..resolve import Context
from ..workload.requests import RequestClasses
from . import milp

QS = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class Caps:
    """Utilization caps; verification by simulation tightens the one that bottlenecks."""

    prefill: float = 0.97  # stability margin of the pooled prefill queue
    line: float = 0.95
    decode: float = 0.9

    def tightened(self, which: str, factor: float = 0.9) -> Caps:
        return Caps(**{**self.__dict__, which: getattr(self, which) * factor})


@dataclass(frozen=True)
class DecodeOption:
    cand: milp.DecodeCandidate
    inst: Instance


def _instances(ctx: Context, gpu: str) -> list[Instance]:
    g = ctx.gpus[gpu]
    return parallelism_candidates(
        ctx.model, g, ctx.scenario.search.max_gpus_per_instance, extra_sizes=1
    )


def decode_options(
    ctx: Context, role: str, dc: str, gpus: list[str], context_tokens: float
) -> list[DecodeOption]:
    tpot = ctx.scenario.sla.tpot_ms / 1e3
    out = []
    for gname in gpus:
        if ctx.available(dc).get(gname, 0) <= 0:
            continue
        for inst in _instances(ctx, gname):
            if inst.n_gpus > ctx.available(dc)[gname]:
                continue
            b, step = roofline.max_batch_for_tpot(inst, context_tokens, tpot)
            if b < 1:
                continue
            key = f"{role}:{dc}:{inst.label}"
            cand = milp.DecodeCandidate(
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


def _line_configs(ctx: Context) -> list[network.LineConfig]:
    mx = ctx.scenario.link.max_lines if ctx.scenario.link else 0
    return [network.LineConfig(s, k) for s in ctx.lines for k in range(1, mx + 1)]


@dataclass
class ArchPlan:
    architecture: str
    prefill: Instance
    prefill_count: int
    pool: pipeline.PrefillPool
    line: network.LineConfig | None
    line_rho: float
    options: list[DecodeOption]
    solution: milp.FleetSolution
    times: pipeline.PathTimes
    cost_per_hour: float
    solve_seconds: float
    milps: int
    singular_max_output_tokens: int | None = None


def plan_architecture(
    ctx: Context, architecture: str, cls: RequestClasses, rate: float, caps: Caps | None = None
) -> ArchPlan:
    sc = ctx.scenario
    caps = caps or Caps(decode=sc.search.decode_utilization)
    t0 = time.perf_counter()
    sla = sc.sla
    avail_p = ctx.available(ctx.prefill_dc)
    p_gpus = [g for g, n in avail_p.items() if n > 0]
    mean_ctx = float(np.dot(cls.weight, cls.input_tokens + cls.output_tokens / 2))
    best: ArchPlan | None = None
    milps = 0
    reasons: list[str] = []
    chunk = sc.search.prefill_chunk_tokens
    floor_miss: dict[float, float] = {}  # best achievable share over each SLA with zero queueing
    for pg in p_gpus:
        for pinst in _instances(ctx, pg):
            service = pipeline.prefill_service_s(pinst, cls, chunk)
            for q, s in ((0.9, sla.ttft_p90_s), (0.99, sla.ttft_p99_s)):
                over = float(np.dot(cls.weight, service > s))
                floor_miss[q] = min(floor_miss.get(q, 1.0), over)
                if over > 1 - q + 1e-9:
                    worst = float(service.max())
                    reasons.append(
                        f"TTFT P{round(q * 100)} <= {s:g} s cannot be met: prefill alone takes up to {worst:.2f} s "
                        f"on {pinst.label} and {over * 100:.1f}% of requests exceed {s:g} s with no queueing at all "
                        f"(relax sla.ttft_p{round(q * 100)}_s above {np.quantile(service, q):.2f} s or use faster prefill GPUs)"
                    )
            load = rate * float(np.dot(cls.weight, service))
            n_min = int(np.floor(load / caps.prefill)) + 1
            if architecture == "idc_pd":
                md_opts = decode_options(ctx, "decode", ctx.prefill_dc, [pg], mean_ctx)
                rld_opts: list[DecodeOption] = []
                lines: list[network.LineConfig | None] = [None]
            else:
                mgpus = [g for g, n in ctx.available(ctx.main_dc).items() if n > 0]
                md_opts = decode_options(ctx, "main_decode", ctx.main_dc, mgpus, mean_ctx)
                rld_opts = []
                if architecture == "pdd":
                    rgpus = [g for g, n in ctx.available(ctx.relay_dc).items() if n > 0]
                    rld_opts = decode_options(ctx, "relay_decode", ctx.relay_dc, rgpus, mean_ctx)
                lines = list(_line_configs(ctx))
            if not md_opts:
                reasons.append(_tpot_reason(ctx, architecture, pg, mean_ctx))
                continue
            md_step = max(o.cand.step_s for o in md_opts)
            rld_step = max((o.cand.step_s for o in rld_opts), default=0.0)
            md_inst = min(md_opts, key=lambda o: o.cand.cost_per_hour / o.cand.tokens_per_s).inst
            cheapest_decode = min(
                o.cand.cost_per_hour / (o.cand.tokens_per_s * caps.decode) for o in md_opts
            )
            decode_lb = rate * float(np.dot(cls.weight, cls.output_tokens)) * cheapest_decode
            for n_p in range(n_min, n_min + sc.search.max_prefill_extra):
                if n_p * pinst.n_gpus > avail_p.get(pg, 0):
                    reasons.append(
                        f"prefill needs {n_p} x {pinst.n_gpus} {pg} in {ctx.prefill_dc}, {avail_p.get(pg, 0)} available"
                    )
                    break
                pool = pipeline.PrefillPool(pinst, n_p, service, rate, cls.weight)
                for line in lines:
                    rho_l = 0.0
                    if line is not None:
                        xb = network.line_bytes(
                            ctx.model, cls.input_tokens, cls.hit_d, sc.policy.drc
                        )
                        rho_l = rate * float(np.dot(cls.weight, xb)) / line.capacity_bytes_s
                        if rho_l >= caps.line:
                            continue
                    fixed = n_p * pinst.cost_per_hour + (line.cost_per_hour if line else 0.0)
                    if best is not None and fixed + decode_lb * 0.999 >= best.cost_per_hour:
                        continue  # cannot beat the incumbent: bound
                    times = pipeline.path_times(
                        cls,
                        service,
                        pinst,
                        md_inst,
                        md_step,
                        line,
                        rho_l,
                        rld_opts[0].inst if rld_opts else None,
                        rld_step,
                        sc.policy,
                    )
                    tables = _tables(
                        ctx,
                        architecture,
                        cls,
                        rate,
                        pool,
                        times,
                        md_opts,
                        rld_opts,
                        pinst,
                        n_p,
                        pg,
                        caps,
                    )
                    milps += 1
                    sol = milp.solve(tables, sc.search.time_limit_s)
                    if sol is None:
                        continue
                    cost = fixed + sol.cost_per_hour
                    if best is None or cost < best.cost_per_hour - 1e-9:
                        best = ArchPlan(
                            architecture,
                            pinst,
                            n_p,
                            pool,
                            line,
                            rho_l,
                            md_opts + rld_opts,
                            sol,
                            times,
                            cost,
                            0.0,
                            0,
                        )
    if best is None:
        raise InfeasibleError(_diagnose(ctx, architecture, sorted(reasons, key=_reason_rank)))
    best.solve_seconds = time.perf_counter() - t0
    best.milps = milps
    best.singular_max_output_tokens = (
        sc.policy.singular_max_output_tokens if architecture == "pdd" else None
    )
    return best


def _tables(
    ctx, architecture, cls, rate, pool, times, md_opts, rld_opts, pinst, n_p, pg, caps
) -> milp.FleetTables:
    sc = ctx.scenario
    n = len(cls)
    paths = list(times.ttft_fixed_s)
    allowed = {p: np.ones(n, bool) for p in paths}
    if architecture == "pdd":
        wants = pipeline.relay_wanted(times.ttft_fixed_s["p_md"], pool, sc.sla.ttft_p90_s)
        allowed["p_rld_md"] = wants
        lim = sc.policy.singular_max_output_tokens
        allowed["p_rld"] = wants & (cls.output_tokens <= (lim if lim is not None else -1))
    elif architecture == "cdc_pd":
        allowed = {"p_md": np.ones(n, bool)}
    miss = {
        q: {p: pipeline.miss_probability(times.ttft_fixed_s[p], pool, s) for p in allowed}
        for q, s in ((0.9, sc.sla.ttft_p90_s), (0.99, sc.sla.ttft_p99_s))
    }
    kvb = np.asarray(perf_arch.kv_bytes(ctx.model, cls.input_tokens + cls.output_tokens / 2))
    left: dict[tuple[str, str], int] = {}
    for d in sc.datacenters:
        for g, k in d.gpus.items():
            left[(d.name, g)] = k
    left[(ctx.prefill_dc, pg)] -= n_p * pinst.n_gpus
    return milp.FleetTables(
        rate_rps=rate,
        weight=cls.weight,
        allowed=allowed,
        miss=miss,
        md_tokens={p: times.md_tokens[p] for p in allowed},
        rld_tokens={p: times.rld_tokens[p] for p in allowed},
        kv_bytes=kvb,
        md=[o.cand for o in md_opts],
        rld=[o.cand for o in rld_opts],
        gpus_left=left,
        decode_cap=caps.decode,
    )


def _tpot_reason(ctx: Context, architecture: str, prefill_gpu: str, context: float) -> str:
    """Why no decode instance qualifies: the fastest single-request step against the TPOT target."""
    dc = ctx.prefill_dc if architecture == "idc_pd" else ctx.main_dc
    gpus = (
        [prefill_gpu]
        if architecture == "idc_pd"
        else [g for g, n in ctx.available(dc).items() if n > 0]
    )
    steps = [
        (roofline.decode_step(i, 1, context).total_s, i.label)
        for g in gpus
        for i in _instances(ctx, g)
        if i.n_gpus <= ctx.available(dc).get(g, 0)
    ]
    if not steps:
        return f"TPOT: the model fits on no instance of {', '.join(gpus)} within the GPUs available in {dc}"
    t, label = min(steps)
    return (
        f"TPOT {ctx.scenario.sla.tpot_ms:g} ms is below the fastest decode step ({t * 1e3:.1f} ms on {label} "
        f"at {context:,.0f} tokens of context) (relax sla.tpot_ms above {t * 1e3:.1f})"
    )


def _reason_rank(r: str) -> int:
    # SLA impossibilities first (no hardware helps), then TPOT, then availability
    return 0 if r.startswith("TTFT") else 1 if "TPOT" in r else 2


def _diagnose(ctx: Context, architecture: str, reasons: list[str]) -> str:
    sc = ctx.scenario
    msg = f"{architecture}: no plan meets the scenario"
    if reasons:
        return f"{msg}: {reasons[0]}"
    return (
        f"{msg}: TTFT P90 <= {sc.sla.ttft_p90_s} s / P99 <= {sc.sla.ttft_p99_s} s cannot be met with the "
        f"available GPUs and lines (relax sla.ttft_p90_s/ttft_p99_s, lower workload.rate_rps, or add GPUs)"
    )
