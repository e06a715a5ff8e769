"""A fixed fleet at a given rate, by the planner's analytic models, and the highest rate at
which it still meets the SLA (bisection).

At a rate r the fleet is checked exactly as the optimizer checks the fleet it buys: the
prefill pool as one M/G/c queue (its utilization under the prefill cap), the line's KV bytes
under its cap, and the MILP of optimize/model.py over the fleet's own decode groups (each
group's instance count bounded by what the fleet has), whose flows are the routing and whose
rows are decode tokens/s at the TPOT target, KV memory, and the P90/P99 TTFT miss shares.
Feasible means some routing meets every row. Which resource gives out is read off the same
quantities (`limits`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pdd_plan import architectures
from pdd_plan.architectures import P_RLD_MD, Architecture
from pdd_plan.common.search import largest_meeting
from pdd_plan.evaluate.fleet import FleetSpec, instance, speed_of
from pdd_plan.inputs.pieces import Profiles
from pdd_plan.inputs.schema.scenario import SLA
from pdd_plan.latency.line import transfer
from pdd_plan.latency.prefill import pool as prefill_pool
from pdd_plan.optimize import milp as milp
from pdd_plan.optimize import routed, summary, tables
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.milp import forced
from pdd_plan.optimize.problem import Problem
from pdd_plan.optimize.search.enumeration import Shared, mean_context
from pdd_plan.optimize.solved import SolverResult
from pdd_plan.outputs.plan import ArchitecturePlan, InstanceGroup, LineChoice
from pdd_plan.perf import roofline
from pdd_plan.perf.instance import Instance
from pdd_plan.workload.requests import RequestClasses

# the resources a fleet can run out of, in the order a tie is reported
RESOURCES = ("prefill_queue", "ttft", "decode_tpot", "kv_memory", "line", "relay")


@dataclass
class FleetModel:
    """The rate-independent part of one architecture's fleet: instances, service times,
    decode candidates (one per group) and the line."""

    pb: Problem  # the planner's inputs (GPU profiles as the fleet is deployed)
    spec: Architecture
    fleet: FleetSpec
    classes: RequestClasses
    shared: Shared
    caps: Caps
    pinst: Instance  # a prefill instance (the first group's: its GPU sets the RDMA time)
    n_prefill: int
    service: np.ndarray  # per class, seconds of the pooled prefill (capacity-equivalent)
    strata_service: np.ndarray  # the same per stratum of cls.fine: the queue's service law
    md: list[tables.DecodeOption]
    rld: list[tables.DecodeOption]
    counts: dict[str, int]  # decode candidate key -> instances in the fleet
    line: transfer.LineConfig | None
    slow: list[str] = field(default_factory=list)  # decode groups whose batch of 1 breaks TPOT

    @property
    def mean_service_s(self) -> float:
        return float(np.dot(self.classes.weight, self.service))


def _prefill(profiles: Profiles, file: str, chunk: int, fs: FleetSpec, classes: RequestClasses):
    groups = [(i, g) for i, g in enumerate(fs.instances) if g.role == "prefill" and g.count > 0]
    if not groups:
        return None, 0, np.zeros(len(classes)), np.zeros(len(classes.fine))
    rate = np.zeros(len(classes))  # requests/s per class the pool serves when busy
    strata = np.zeros(len(classes.fine))  # and per stratum
    first = None
    n = 0
    for i, g in groups:
        inst = instance(profiles, file, g, f"{fs.where}.instances[{i}]")
        first = first or inst
        base, k = speed_of(inst.gpu)
        # a drawn speed k: every pass exactly 1/k of the nominal instance's (fleet._faster)
        nominal = None if k == 1.0 else (dataclasses.replace(inst, gpu=base), k)
        svc = prefill_pool.prefill_strata_service_s(inst, classes, chunk, nominal)
        rate += g.count / classes.class_mean(svc)
        strata += g.count / svc
        n += g.count
    # mixed groups act as n identical servers of the same total capacity (exact for one type)
    return first, n, n / rate, n / strata


# (nominal GPU profile's id, model's id, the instance's sizes, context) -> (the nominal
# instance, its decode step seconds by batch)
_STEPS: dict[tuple, tuple[Instance, dict[int, float]]] = {}


def max_batch_for_tpot(inst: Instance, context: float, tpot_s: float) -> tuple[int, float]:
    """`roofline.max_batch_for_tpot`, from the nominal instance where `inst` runs on a
    `deployed` profile of speed k: every pass there takes exactly 1/k of the nominal time, so
    the batch meeting `tpot_s` is the nominal one meeting `tpot_s k`, its step 1/k of the
    nominal step. The nominal steps are memoized by batch: the draws of an uncertainty block
    bisect the same range and share most probes."""
    base, k = speed_of(inst.gpu)
    if k == 1.0:
        return roofline.max_batch_for_tpot(inst, context, tpot_s)
    sizes = tuple(getattr(inst, f.name) for f in dataclasses.fields(inst))[2:]
    key = (id(base), id(inst.model), sizes, float(context))
    hit = _STEPS.get(key)
    if hit is None or hit[0].gpu is not base or hit[0].model is not inst.model:
        if len(_STEPS) > 1024:
            _STEPS.clear()
        hit = (dataclasses.replace(inst, gpu=base), {})  # the entry keeps base and model alive
        _STEPS[key] = hit
    nominal, memo = hit

    def step(b: int) -> float:
        if b not in memo:
            memo[b] = roofline.decode_step(nominal, b, context).total_s
        return memo[b]

    # roofline.max_batch_for_tpot's bisection on the nominal steps, monotone in the batch: so
    # it may start from the closest batches already timed either side of the target
    target, cap = tpot_s * k, inst.max_batch(context)
    if cap < 1 or step(1) > target:
        return 0, step(1) / k
    if step(cap) <= target:
        return cap, step(cap) / k
    lo = max(b for b, t in memo.items() if t <= target and b <= cap)
    hi = min(b for b, t in memo.items() if t > target and b > lo)
    lo = largest_meeting(step, target, lo, hi)
    return lo, step(lo) / k


def _decode(
    profiles: Profiles,
    file: str,
    sla: SLA,
    fs: FleetSpec,
    role: str,
    mean_ctx: float,
    fm_slow: list[str],
):
    tpot = sla.tpot_ms / 1e3
    opts, counts = [], {}
    for i, g in enumerate(fs.instances):
        if g.role != role or g.count <= 0:
            continue
        where = f"{fs.where}.instances[{i}]"
        inst = instance(profiles, file, g, where)
        b, step = max_batch_for_tpot(inst, mean_ctx, tpot)
        if b < 1:
            fm_slow.append(where)
            continue
        # a datacenter label of its own per group: the MILP's GPU rows then cap each group's
        # count at the fleet's (two groups of one GPU type cannot trade instances)
        key = f"{role}:{i}"
        cand = tables.DecodeCandidate(
            key,
            role,
            f"{g.datacenter}#{i}",
            g.gpu,
            inst.n_gpus,
            inst.cost_per_hour,
            b / step,
            inst.kv_pool_bytes,
            step,
        )
        opts.append(tables.DecodeOption(cand, inst))
        counts[key] = g.count
    return opts, counts


def fleet_model(
    pb: Problem,
    fs: FleetSpec,
    classes: RequestClasses,
    caps: Caps,
    decode_pb: Problem | None = None,
) -> FleetModel:
    """The fleet's model; `decode_pb` (default `pb`) builds the decode instances from its GPU
    profiles, so that prefill and decode may run at different speeds (an uncertainty draw's)."""
    spec = architectures.get(fs.architecture)
    mean_ctx = mean_context(classes)
    slow: list[str] = []
    prof = Profiles(pb.model, pb.catalog.gpus, pb.lines, pb.catalog.engine)
    dprof = (
        prof
        if decode_pb is None
        else Profiles(pb.model, decode_pb.catalog.gpus, pb.lines, pb.catalog.engine)
    )
    chunk = pb.catalog.prefill_chunk_tokens
    pinst, n_p, service, strata = _prefill(prof, pb.file, chunk, fs, classes)
    md, c_md = _decode(dprof, pb.file, pb.sla, fs, spec.decode_role, mean_ctx, slow)
    rld, c_rld = (
        _decode(dprof, pb.file, pb.sla, fs, "relay_decode", mean_ctx, slow)
        if spec.relays
        else ([], {})
    )
    line = None
    if spec.crosses_line and fs.line is not None:
        sku = next(s for s in pb.lines if s.name == fs.line.sku)
        line = transfer.LineConfig(sku, fs.line.count)
    return FleetModel(
        pb,
        spec,
        fs,
        classes,
        Shared.of(pb, spec, classes, caps),
        caps,
        pinst,
        n_p,
        service,
        strata,
        md,
        rld,
        {**c_md, **c_rld},
        line,
        slow,
    )


def rate_bound(fm: FleetModel, caps: Caps | None = None) -> float:
    """A rate no routing can exceed: prefill, line and decode (main plus relay) at their caps
    (`caps` of 1: the stability limit, beyond which no queue has a steady state)."""
    w, c = fm.classes.weight, caps or fm.caps
    bounds = [c.prefill * fm.n_prefill / fm.mean_service_s]
    if fm.line is not None:
        per_req = float(np.dot(w, fm.shared.line_bytes))
        if per_req > 0:
            # singular requests finishing on relay decode do not cross: bound by those that may
            bounds.append(c.line * fm.line.usable_bytes_s / per_req / _crossing_floor(fm))
    cap = sum(fm.counts[o.cand.key] * c.decode * o.cand.tokens_per_s for o in fm.md + fm.rld)
    bounds.append(cap / max(float(np.dot(w, fm.classes.output_tokens)), 1e-9))
    return max(min(bounds), 0.0)


def stability_bound(fm: FleetModel) -> float:
    """The rate at which prefill, the line or decode reaches 100% utilization."""
    return rate_bound(fm, Caps(prefill=1.0, line=1.0, decode=1.0))


def _crossing_floor(fm: FleetModel) -> float:
    """Least share of requests that must cross the line (all but singular ones on relay)."""
    lim = fm.pb.policy.singular_max_output_tokens
    if not (fm.rld and fm.spec.singular_on_relay and lim is not None):
        return 1.0
    return max(float(np.dot(fm.classes.weight, fm.classes.output_tokens > lim)), 1e-3)


@dataclass(frozen=True)
class AtRate:
    """The fleet at one rate: feasible or not, each resource's use / cap, and (feasible) the
    plan the MILP's routing describes."""

    rate: float
    ok: bool
    limits: dict[str, float]
    # the plan is built on first use: the bisection visits ~10 feasible rates and keeps one,
    # and summarizing a plan (its TTFT percentiles) cost more than the MILP that decides it
    build: Callable[[], ArchitecturePlan] | None = field(default=None, repr=False)

    @functools.cached_property  # kept in the instance's __dict__: the fields stay frozen
    def plan(self) -> ArchitecturePlan | None:
        return self.build() if self.build is not None else None

    @property
    def first_limit(self) -> str:
        """The resource closest to (or furthest past) its cap."""
        return max(RESOURCES, key=lambda k: (self.limits.get(k, 0.0), -RESOURCES.index(k)))


def _line_level(fm: FleetModel, rate: float) -> tuple[tables.LineOption, float]:
    if fm.line is None:
        return tables.rdma_option(), 0.0
    load = rate * float(np.dot(fm.classes.weight, fm.shared.line_bytes))
    # of what the line and its pool carry, as the planner's line options and the law take it
    rho = load / fm.line.usable_bytes_s
    level = min(max(rho, 1e-6) * (1 + 1e-6) + 1e-9, fm.caps.line)
    key = f"{fm.line.count}x{fm.line.sku.name}"
    opt = tables.LineOption(key, fm.line, level, fm.line.cost_per_hour, fm.line.usable_bytes_s)
    return opt, rho


def _limits(fm: FleetModel, rate: float, rho_p: float, rho_l: float, pt) -> dict[str, float]:
    """Each resource's load over its cap at `rate` (>= 1: out of it). Decode and relay take
    the routing that spares them most; TTFT the best path per class."""
    w, c, cls = fm.classes.weight, fm.caps, fm.classes
    out = {"prefill_queue": rho_p / c.prefill, "line": rho_l / c.line if fm.line else 0.0}

    def cap(opts, attr: str) -> float:
        return sum(fm.counts[o.cand.key] * c.decode * getattr(o.cand, attr) for o in opts)

    tok = rate * float(np.dot(w, cls.output_tokens))
    out["decode_tpot"] = tok / max(cap(fm.md + fm.rld, "tokens_per_s"), 1e-9)
    step = max((o.cand.step_s for o in fm.md), default=0.0)
    held = rate * float(np.dot(w, cls.output_tokens * step * fm.shared.kv_bytes))
    out["kv_memory"] = held / max(cap(fm.md, "kv_pool_bytes"), 1e-9)
    if pt is None:
        return out
    miss = []
    for q, m in pt.miss.items():
        best = np.min(np.vstack([np.where(pt.allowed[p], m[p], 1.0) for p in m]), axis=0)
        miss.append(float(np.dot(w, best)) / (1.0 - q))
    out["ttft"] = max(miss)
    if fm.rld:
        wants = pt.allowed.get(P_RLD_MD, np.zeros(len(w), bool))
        need = rate * float(np.dot(w * wants, pt.rld_tokens[P_RLD_MD]))
        out["relay"] = need / max(cap(fm.rld, "tokens_per_s"), 1e-9)
    return out


def at_rate(fm: FleetModel, rate: float) -> AtRate:
    """Whether the fleet meets the SLA at `rate` by the analytic models (and how hard it runs)."""
    rho_p = rate * fm.mean_service_s / fm.n_prefill
    line_opt, rho_l = _line_level(fm, rate)
    if rho_p >= fm.caps.prefill or rho_l >= fm.caps.line:
        return AtRate(rate, False, _limits(fm, rate, rho_p, rho_l, None))
    # the optimizer's law (PrefillPool.of): service moments over the strata, bursty arrivals
    cls = fm.classes
    pool = prefill_pool.PrefillPool(
        fm.pinst, fm.n_prefill, fm.strata_service, rate, cls.fine.weight, cls.arrival_ca2
    )
    sh, spec, caps = fm.shared, fm.spec, fm.caps
    rules = (sh.sla, sh.policy, sh.prefill_chunk_tokens)
    pt = tables.path_table(
        *rules, spec, fm.classes, pool, fm.service, fm.md, fm.rld, line_opt, caps
    )
    lim = _limits(fm, rate, rho_p, rho_l, pt)
    gpus: dict[tuple[str, str], int] = {}  # the fleet's own GPUs, summed per site
    for o in fm.md + fm.rld:
        site = (o.cand.datacenter, o.cand.gpu)
        gpus[site] = gpus.get(site, 0) + fm.counts[o.cand.key] * o.cand.gpus
    t = tables.FleetTables(
        weight=fm.classes.weight,
        line_bytes=fm.shared.line_bytes,
        kv_bytes=fm.shared.kv_bytes,
        md=[o.cand for o in fm.md],
        rld=[o.cand for o in fm.rld],
        lines=[line_opt],
        paths=[pt],
        gpus_left=gpus,
        decode_cap=caps.decode,
        rate_rps=rate,
    )
    # a forced routing needs no solver for the verdict; the plan's routing is solved on use
    known = forced.verdict(t)
    sol = milp.solve(t, "cost", 0.0, fm.pb.search.time_limit_s) if known is None else None
    if known is False or (known is None and sol is None):
        return AtRate(rate, False, lim)
    return AtRate(
        rate, True, lim, lambda: _plan(fm, rate, pool, line_opt, rho_l, sol or _solved(fm, t), pt)
    )


def _solved(fm: FleetModel, t: tables.FleetTables):
    """The MILP's routing for tables `forced.verdict` found feasible (it agrees with the
    solver to its tolerance; a disagreement is a bug, said as one)."""
    sol = milp.solve(t, "cost", 0.0, fm.pb.search.time_limit_s)
    if sol is None:
        raise RuntimeError(
            f"the forced-routing verdict and the MILP disagree at {t.rate_rps} req/s"
        )
    return sol


def _plan(fm: FleetModel, rate, pool, line_opt, rho_l, sol, pt) -> ArchitecturePlan:
    """The fleet at `rate` as a typed plan: the MILP's routing, the fleet's real counts."""
    sol = dataclasses.replace(sol, counts=dict(fm.counts))  # every instance runs (the MILP
    # needed only some)
    pol = fm.pb.policy
    singular = pol.singular_max_output_tokens if fm.spec.singular_on_relay and fm.rld else None
    flows = routed.router_flows(sol.flows, fm.classes, rate, pol, singular, bool(fm.rld))
    fine = pt.fine
    if flows is not None and fm.line is not None:
        # the line at the load the router puts on it (its singular requests stay off it)
        crossing = sum(flows[k] for k in flows if pt.crosses_line[k])
        rho_r = float(np.dot(crossing, fm.shared.line_bytes)) / fm.line.usable_bytes_s
        if 0.0 < rho_r < line_opt.level * (1.0 - 1e-9):
            at = dataclasses.replace(line_opt, level=rho_r)
            chunk = fm.pb.catalog.prefill_chunk_tokens
            cw = routed.crossing_weight(flows, pt.crosses_line, fm.classes)
            fine = tables.fine_times(
                pol, chunk, fm.classes, pool, fm.service, fm.md, fm.rld, at, fm.caps, cw
            )
            rho_l = rho_r
    ap = SolverResult(
        architecture=fm.spec.name,
        rate=rate,
        prefill=fm.pinst,
        prefill_count=fm.n_prefill,
        pool=pool,
        line=line_opt.config,
        line_rho=rho_l,
        options=fm.md + fm.rld,
        solution=sol,
        times=pt.times,
        # per stratum: the percentiles of the real mixture, not of the classes' means (with a
        # flow-capped line a transfer's time follows its size, so eight classes misplace the P90)
        operating=fine,
        cost_per_hour=fm.fleet.cost_per_hour,
        milps=1,
        singular_max_output_tokens=singular,
        routed=flows,
    )
    plan = summary.summarize(ap, fm.classes, rate, fm.pb.sites.prefill)
    # the fleet as given (its own groups and line price), not as the summary rebuilds it
    groups = [InstanceGroup.model_validate(g.model_dump()) for g in fm.fleet.instances]
    line = plan.line
    if fm.fleet.line is not None and line is not None:
        line = LineChoice.model_validate(
            {**line.model_dump(), "cost_per_hour": fm.fleet.line.cost_per_hour}
        )
    # validated again: the plan's limits hold for the fleet's own groups too
    return ArchitecturePlan.model_validate({**dict(plan), "instances": groups, "line": line})


def search(fm: FleetModel, rel_tol: float = 0.002, max_iter: int = 40) -> tuple[AtRate, AtRate]:
    """(highest feasible rate found, the infeasible rate just above it) by bisection between
    a thousandth of the rate bound and the bound. The first is infeasible (rate = that
    thousandth) when the fleet meets the SLA at no rate worth serving."""
    hi_r = rate_bound(fm)
    lo = at_rate(fm, max(hi_r * 1e-3, 1e-6))
    if not lo.ok:
        return lo, lo
    hi = at_rate(fm, hi_r)
    if hi.ok:  # bounds are caps, so this is rare: the bound itself is served
        return hi, at_rate(fm, hi_r * (1 + rel_tol))
    for _ in range(max_iter):
        if hi.rate - lo.rate <= rel_tol * lo.rate:
            break
        mid = at_rate(fm, 0.5 * (lo.rate + hi.rate))
        if mid.ok:
            lo = mid
        else:
            hi = mid
    return lo, hi
