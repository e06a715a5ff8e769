"""Measure a solved plan into the typed `ArchitecturePlan`, one small function per metric
(instances, line, percentiles, path shares, routing, solver), and compare architectures."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdd_plan import architectures
from pdd_plan.architectures import (
    LINE_BASELINE,
    LOCAL_BASELINE,
    P_MD,
    P_RLD,
    P_RLD_MD,
    PATHS,
    RELAY_ARCH,
    RELAY_PATHS,
)
from pdd_plan.common.errors import InfeasibleError
from pdd_plan.latency import paths as latency_paths
from pdd_plan.latency import spread
from pdd_plan.latency import ttft as ttft_law
from pdd_plan.latency.line import delay_shape
from pdd_plan.optimize import routed
from pdd_plan.optimize.solved import QS, SolverResult
from pdd_plan.outputs.plan import (
    TPOT,
    TTFT,
    ArchitecturePlan,
    InstanceGroup,
    LineChoice,
    Reason,
    RouteShare,
    Routing,
    Solver,
    TransferSeconds,
)
from pdd_plan.perf import layers, roofline
from pdd_plan.perf.instance import Instance, instance_key
from pdd_plan.workload.requests import RequestClasses


def _r(x: float, nd: int = 4) -> float:
    return float(round(float(x), nd)) + 0.0  # + 0.0: a tiny negative rounds to 0.0, not -0.0


# BCR's denominator at least one cent an hour: a plan whose capacity is all owned at 0 (sunk)
# has no spend, and its BCR is then the (large, finite) goodput per cent rather than infinite
MIN_SPEND_PER_HOUR = 0.01


def bcr(rate: float, cost_per_hour: float) -> float:
    """Requests per dollar of the cost as counted (owned capacity at its owned price)."""
    return rate * 3600.0 / max(cost_per_hour, MIN_SPEND_PER_HOUR)


def instances(p: SolverResult, prefill_dc: str) -> list[InstanceGroup]:
    """The plan's instance groups: its prefill pool, then every decode option it buys."""
    pi = p.prefill
    out = [group("prefill", pi.gpu.name, prefill_dc, p.prefill_count, pi)]
    for o in p.options:
        k = p.solution.counts.get(o.cand.key, 0)
        if k > 0:
            out.append(group(o.cand.role, o.cand.gpu, o.cand.datacenter, k, o.inst))
    return out


def group(role: str, gpu: str, dc: str, count: int, inst: Instance) -> InstanceGroup:
    """`count` instances of `inst` in one plan group, priced at the instance's $/hour."""
    return InstanceGroup(
        role=role,
        gpu=gpu,
        datacenter=dc,
        count=int(count),
        gpus_per_instance=int(inst.n_gpus),
        tp=int(inst.tp),
        dp=int(inst.dp),
        ep=int(inst.ep),
        cost_per_hour=_r(count * inst.cost_per_hour, 2),
    )


def _shares(p: SolverResult, rate: float) -> dict[str, np.ndarray]:
    """Request shares per path and class, as the router serves them (:mod:`routed`)."""
    return {k: v / rate for k, v in p.flows.items()}


def _fine(p: SolverResult) -> latency_paths.PathTimes | None:
    """The plan's path times per stratum of its classes (None: the classes have no strata), at
    the line load its routing makes where that is below the tables' level."""
    if p.operating is not None:
        return p.operating
    return p.tables.paths[p.solution.line_index].fine if p.tables is not None else None


def _mixture(
    p: SolverResult, classes: RequestClasses, shares: dict[str, np.ndarray]
) -> tuple[latency_paths.PathTimes, dict[str, np.ndarray]]:
    """Times and request shares per stratum where the classes have strata (percentiles of the
    real mixture, not of class means), else per class."""
    fine = _fine(p)
    if fine is None or classes.nodes is None or classes.node_class is None:
        return (p.times if fine is None else fine), shares  # no strata: fine is per class
    nc = classes.node_class
    scale = classes.nodes.weight / classes.weight[nc]
    return fine, {k: v[nc] * scale for k, v in shares.items()}


def _kv_transfer(
    ft: latency_paths.PathTimes, shares: dict[str, np.ndarray], sd_bytes: np.ndarray | None
) -> dict[str, float]:
    """KV ready at prefill -> usable at main decode for the requests that send it there (all
    but p_rld): the bare transfer plus the line's delay law per stratum (delay_shape.two_moment;
    a transfer's delay depends on its size, not on its path), as the simulator's kv_transfer_s
    measures it, each stratum's bare time spread as its sizes are (``sd_bytes``, at the bare
    time's seconds per byte over the strata). A plan with no such request: the
    mean over all."""
    w = sum(v for k, v in shares.items() if k != P_RLD)
    j = ft.line_wait(P_MD)
    bare = ft.line_s - j
    qs = delay_shape.transfer_quantiles(
        bare, j, ft.line_wait_var(P_MD), ft.line_wait_atom(P_MD), w, QS,  # type: ignore[arg-type]
        spread.bare_spread(bare, ft.line_bytes, w, sd_bytes),  # type: ignore[arg-type]
    )  # fmt: skip
    if qs is None:
        every = sum(shares.values())
        return {"mean": float(np.dot(every, ft.line_s) / max(float(np.sum(every)), 1e-300))}
    mean = float(np.dot(w, ft.line_s) / np.sum(w))
    return {"p50": qs[0], "p90": qs[1], "p99": qs[2], "mean": mean}


def _operating_step(p: SolverResult, role: str, tokens_per_s: float, mean_ctx: float) -> float:
    """Decode step time (s) at the batch the plan actually runs on `role`, the slowest of its
    instance types. Each running request gains one token per step, so an instance decoding
    `x` tokens/s holds B = x step(B) requests (Little's law); the load splits over the
    instances by their TPOT-target capacity, and no instance runs above that batch."""
    opts = [
        o for o in p.options if o.cand.role == role and p.solution.counts.get(o.cand.key, 0) > 0
    ]
    if not opts:
        return 0.0
    cap = sum(p.solution.counts[o.cand.key] * o.cand.tokens_per_s for o in opts)
    u = min(tokens_per_s / cap, 1.0) if cap > 0 else 0.0
    return max(
        _little_step(o.inst, u * o.cand.tokens_per_s, o.cand.tokens_per_s * o.cand.step_s, mean_ctx)
        for o in opts
    )


_STEP_CACHE: dict[tuple, tuple[object, float]] = {}


def _little_step(inst, x: float, bmax: float, context: float) -> float:
    """step(B) at the B in [1, bmax] with B = x step(B): B - x step(B) rises with B (a step
    grows by less than 1/x per request while the instance is below capacity), so bisect.
    Memoized by the instance's value: a summary asks for the same pool's operating step for
    its TTFT shift, its TPOT and its bottleneck, and a regime map's cells along the line axis
    for the same IDC-PD pool (each bisection is 40 scalar decode steps)."""
    key = (instance_key(inst), float(x), float(bmax), float(context))
    hit = _STEP_CACHE.get(key)
    if hit is None or hit[0] is not inst.model:  # the entry keeps its model alive: ids stay unique
        if len(_STEP_CACHE) > 10_000:
            _STEP_CACHE.clear()
        hit = (inst.model, _bisect_step(inst, x, bmax, context))
        _STEP_CACHE[key] = hit
    return hit[1]


def _bisect_step(inst, x: float, bmax: float, context: float) -> float:
    """:func:`_little_step`'s bisection."""

    def step(b: float) -> float:
        return roofline.decode_step(inst, b, context).total_s

    lo, hi = 1.0, max(bmax, 1.0)
    if lo >= x * step(lo):  # under one request in flight: a batch of one
        return step(lo)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if mid < x * step(mid):
            lo = mid
        else:
            hi = mid
    return step(hi)


def decode_context(classes: RequestClasses) -> float:
    """Mean context (tokens) of a request in a decode batch: its input plus half its output."""
    return float(np.dot(classes.weight, classes.input_tokens + classes.output_tokens / 2))


def _steps(p: SolverResult, role: str, tokens_per_s: float, mean_ctx: float) -> tuple[float, float]:
    """(design, operating) step seconds of `role`: at the TPOT-target batch the tables plan
    with, and at the batch `tokens_per_s` makes (:func:`_operating_step`)."""
    design = max((o.cand.step_s for o in p.options if o.cand.role == role), default=0.0)
    return design, _operating_step(p, role, tokens_per_s, mean_ctx)


def _first_step_shift(
    p: SolverResult, classes: RequestClasses, rate: float, shares: dict[str, np.ndarray]
) -> dict[str, float]:
    """Seconds (<= 0) each path's TTFT moves from the tables' figure: its first token is one
    decode step at the batch it joins (main decode on p_md, relay decode on the relay paths),
    and that batch is the operating one, not the TPOT-target one the tables size with."""
    t, ctx = p.times, decode_context(classes)
    md_role = architectures.get(p.architecture).decode_role
    out: dict[str, float] = {}
    for role, tokens, paths in (
        (md_role, t.md_tokens, (P_MD,)),
        ("relay_decode", t.rld_tokens, RELAY_PATHS),
    ):
        load = rate * sum(float(np.dot(shares[k], tokens[k])) for k in shares)
        design, op = _steps(p, role, load, ctx)
        out.update(dict.fromkeys(paths, min(op - design, 0.0) if design > 0 and op > 0 else 0.0))
    return out


def _sd_bytes(p: SolverResult, classes: RequestClasses, mix: Mixture) -> np.ndarray | None:
    """Per stratum, the spread of the bytes its requests send (None: unknown, or per class)."""
    sd = classes.fine.lacked_sd
    if sd is None or len(sd) != len(mix.times.line_s):
        return None
    return sd * layers.kv_bytes_per_token(p.prefill.model)


def summarize(
    p: SolverResult, classes: RequestClasses, rate: float, prefill_dc: str
) -> ArchitecturePlan:
    """The typed plan of one architecture's solution at ``rate``, one metric per function."""
    shares = _shares(p, rate)
    mix = Mixture(shares, *_mixture(p, classes, shares))
    ttft = _ttft_quantiles(p, classes, rate, mix)
    kv = _kv_transfer(mix.times, mix.fine_shares, _sd_bytes(p, classes, mix))
    _finite_or_refuse(p, [*ttft, kv["mean"]])
    owned, new = p.owned_split if p.owned_split is not None else (None, None)
    return ArchitecturePlan(
        instances=instances(p, prefill_dc),
        line=line_choice(p),
        cost_per_hour=_r(p.cost_per_hour, 2),
        cost_owned_per_hour=_r(owned, 2) if owned is not None else None,
        cost_new_per_hour=_r(new, 2) if new is not None else None,
        goodput_rps=float(f"{rate:.6g}"),  # significant digits: tiny rates stay non-zero
        bcr=_r(bcr(rate, p.cost_per_hour), 4),
        ttft_s=TTFT(**dict(zip(("p50", "p90", "p99"), (_r(x) for x in ttft)))),
        tpot_ms=tpot_ms(p, classes, rate, mix),
        route_share=route_share(shares),
        rld_token_share=rld_token_share(p, classes, shares),
        routing=routing(p, classes, shares),
        prefill_utilization=_r(p.pool.rho),
        kv_transfer_s=TransferSeconds(**{k: _r(v) for k, v in kv.items()}),
        binding_constraints=sorted(p.solution.binding),
        # LP-relaxation duals: $/hour the optimum moves per unit each constraint is relaxed
        shadow_prices={k: _r(v, 6) for k, v in sorted(p.solution.shadow_prices.items())},
        solver=solver(p),
    )


@dataclass(frozen=True)
class Mixture:
    """The requests the percentiles are taken over: ``shares`` per path and class, and the
    path times with their shares per stratum where the classes have strata (else per class)."""

    shares: dict[str, np.ndarray]
    times: latency_paths.PathTimes
    fine_shares: dict[str, np.ndarray]


def _ttft_quantiles(
    p: SolverResult, classes: RequestClasses, rate: float, mix: Mixture
) -> list[float]:
    """TTFT P50/P90/P99 (s) of the mixture: each path's fixed part (its first step at the
    operating batch) plus the prefill wait plus the line's delay."""
    shares, ft, fshares = mix.shares, mix.times, mix.fine_shares
    sooner = _first_step_shift(p, classes, rate, shares)
    fixed = np.concatenate([ft.ttft_fixed_s[k] + sooner.get(k, 0.0) for k in fshares])
    share = np.concatenate([fshares[k] for k in fshares])
    line_wait = np.concatenate([ft.line_wait(k) for k in fshares])
    line_wait_var = np.concatenate([ft.line_wait_var(k) for k in fshares])
    atom = np.concatenate([ft.line_wait_atom(k) for k in fshares])
    sd = spread.fixed_spread(classes, ft, fshares)
    return ttft_law.ttft_quantiles(fixed, share, p.pool, QS, line_wait, line_wait_var, atom, sd)


def tpot_ms(p: SolverResult, classes: RequestClasses, rate: float, mix: Mixture) -> TPOT:
    """TPOT P50/P90 (ms) of the mixture. The tables size decode at its TPOT-target batch; this
    is the step at the batch the plan actually runs (:func:`_operating_step`), what users see."""
    shares, ft, fshares = mix.shares, mix.times, mix.fine_shares
    share = np.concatenate([fshares[k] for k in fshares])
    tpot = np.concatenate([ft.tpot_s[k] for k in fshares])
    md_role = architectures.get(p.architecture).decode_role
    md_load = rate * sum(float(np.dot(shares[k], p.times.md_tokens[k])) for k in shares)
    design, op = _steps(p, md_role, md_load, decode_context(classes))
    if design > 0 and op > 0:
        tpot = tpot * min(op / design, 1.0)
    tp50, tp90 = ttft_law.mixture_quantiles(tpot, share, (0.5, 0.9))
    return TPOT(p50=_r(tp50 * 1e3, 2), p90=_r(tp90 * 1e3, 2))


def line_choice(p: SolverResult) -> LineChoice | None:
    """The leased lines (None: the KV moves over RDMA in one datacenter)."""
    if p.line is None:
        return None
    return LineChoice(
        sku=p.line.sku.name,
        gbps=_r(p.line.sku.gbps, 3),
        count=int(p.line.count),
        cost_per_hour=_r(p.line.cost_per_hour, 2),
        utilization=_r(p.line_rho),
        rtt_ms=_r(p.line.sku.rtt_ms, 3),
    )


def route_share(shares: dict[str, np.ndarray]) -> RouteShare:
    """The share of requests on each path."""
    return RouteShare(**{k: _r(float(shares[k].sum()) if k in shares else 0.0) for k in PATHS})


def rld_token_share(
    p: SolverResult, classes: RequestClasses, shares: dict[str, np.ndarray]
) -> float:
    """The share of output tokens decoded on relay decode."""
    out_tok = float(np.dot(classes.weight, classes.output_tokens))
    rld_tok = sum(float(np.dot(shares[k], p.times.rld_tokens[k])) for k in shares)
    return _r(rld_tok / out_tok if out_tok else 0.0)


def routing(p: SolverResult, classes: RequestClasses, shares: dict[str, np.ndarray]) -> Routing:
    """The router's rule: relay requests whose prefill-side hit rate is at or below the
    threshold (their DRC delta would cross the line too slowly for the TTFT budget; None:
    nothing relays), singular ones finishing on relay decode."""
    relayed = (shares.get(P_RLD_MD, 0) + shares.get(P_RLD, 0)) > 1e-9
    relay_below = routed.relay_threshold(classes.hit_p[relayed])
    h = p.times.handoff if relay_below is not None else None
    return Routing(
        relay_at_or_below_hit_rate=_r(relay_below) if relay_below is not None else None,
        singular_max_output_tokens=p.singular_max_output_tokens,
        handoff_payload=h.payload if h is not None else None,
        handoff_payload_why=h.why if h is not None else None,
    )


def solver(p: SolverResult) -> Solver:
    """How the search ended: the winning MILP's status, MILPs solved, the optimality gap."""
    return Solver(
        status=p.solution.status,
        milps=p.milps,
        optimality_gap=_r(p.optimality_gap, 6),
        dinkelbach_iterations=p.dinkelbach_iterations,
    )


def _finite_or_refuse(p: SolverResult, figures: list[float]) -> None:
    """An unbounded transfer or TTFT never reaches a plan: the architecture has no plan, for a
    one-line reason (an unstable line queue is what makes them unbounded)."""
    if all(np.isfinite(x) for x in figures):
        return
    where = f"{p.line.count} x {p.line.sku.name} at {p.line_rho:.0%}" if p.line else "its fleet"
    why = Reason(
        kind="line_capacity",
        message=f"line capacity: the KV transfer time is unbounded on {where} (its queue is "
        "unstable); allow more or faster lines (link.candidates, link.max_lines) or lower "
        "workload.rate_rps",
        field="link.max_lines",
    )
    raise InfeasibleError(f"{p.architecture}: no plan meets the scenario: {why.message}", [why])


def utilization(p: SolverResult, resource: str) -> float:
    """How hard the plan runs `resource` (prefill | line | decode), as a fraction of capacity."""
    if resource == "prefill":
        return p.pool.rho
    if resource == "line":
        return p.line_rho if p.line is not None else 1.0
    t = p.times
    md = [o for o in p.options if o.cand.role in ("main_decode", "decode")]
    cap = sum(p.solution.counts.get(o.cand.key, 0) * o.cand.tokens_per_s for o in md)
    load = sum(float(np.dot(p.solution.flows[k], t.md_tokens[k])) for k in p.solution.flows)
    return load / cap if cap > 0 else 1.0


def p90_on_fleet_all_direct(p: SolverResult, mean_ctx: float | None = None) -> float:
    """P90 TTFT of the same fleet and line with every request sent P -> MD (CDC-PD routing);
    with `mean_ctx` (decode_context) the first step at the batch all output tokens make on MD."""
    t = _fine(p) or p.times  # the pool's weights are per stratum when the classes have strata
    fixed = t.ttft_fixed_s[P_MD]
    if mean_ctx is not None:
        every = p.rate * float(np.dot(p.pool.weight, t.md_tokens[P_MD]))
        design, op = _steps(p, architectures.get(p.architecture).decode_role, every, mean_ctx)
        fixed = fixed + (min(op - design, 0.0) if design > 0 and op > 0 else 0.0)
    line_wait, var, atom = t.line_wait(P_MD), t.line_wait_var(P_MD), t.line_wait_atom(P_MD)
    w = p.pool.weight.copy()
    return ttft_law.ttft_quantiles(fixed, w, p.pool, (0.9,), line_wait, var, atom)[0]


def comparison(
    plans: dict[str, ArchitecturePlan],
    raw: dict[str, SolverResult],
    classes: RequestClasses | None = None,
) -> dict:
    """PDD against its two baselines: BCR gains, and its P90 TTFT against the same fleet with
    every request sent P -> MD (what CDC-PD routing would do on it); `classes`: the classes the
    plans were summarized over (decode's operating batch), as summarize."""
    relay, line_base, local = RELAY_ARCH, LINE_BASELINE, LOCAL_BASELINE

    def gain(a: str, b: str) -> float | None:
        if a in plans and b in plans and plans[b].bcr > 0:  # bcr rounds to 0 at huge costs
            # 5 places: printed to 0.1%, a gain kept to 4 would be rounded twice (-7.945% kept
            # as -7.95%, printed -8.0%, where the draws' own figure prints -7.9%)
            return _r(plans[a].bcr / plans[b].bcr - 1.0, 5)
        return None

    red = direct = None
    if relay in plans and not plans[relay].groups("relay_decode"):
        # no relay decode: the fleet already sends all P -> MD (the laws' two routes to that
        # figure differ in the last digits, and a "reduction" on no relay would be noise)
        direct, red = plans[relay].ttft_s.p90, 0.0
    elif relay in raw:
        direct = p90_on_fleet_all_direct(
            raw[relay], decode_context(classes) if classes is not None else None
        )
        direct = direct if np.isfinite(direct) else None  # all-direct may swamp the line
        red = _r(1.0 - plans[relay].ttft_s.p90 / direct) if direct else None
    return {
        f"bcr_gain_vs_{local}": gain(relay, local),
        f"bcr_gain_vs_{line_base}": gain(relay, line_base),
        f"p90_ttft_reduction_vs_{line_base}": red,
        "p90_ttft_same_fleet_all_p_md_s": _r(direct) if direct is not None else None,
    }
