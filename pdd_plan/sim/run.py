"""The simulator's entry points: ``run`` (build the workload for a plan and replay it) and
``verify`` (replay and check the SLA: what the optimizer re-solves on)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pdd_plan.inputs.context import Context
from pdd_plan.inputs.pieces import ReplaySetup
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.scenario import SLA
from pdd_plan.perf.comm import serving
from pdd_plan.perf.engine_limits import engines
from pdd_plan.sim import sequential, setup, tails
from pdd_plan.sim.queues import Progress
from pdd_plan.sim.replay import replay_requests
from pdd_plan.sim.result import SimResult, sig
from pdd_plan.sim.setup import PlanLike
from pdd_plan.sim.verdict import Check, EarlyStop, Verdict
from pdd_plan.sim.warmup import NONE_UNSTABLE, truncate

WINDOW = 20_000  # requests an unstable line's figures are stated over (250 s at 80 req/s)


def run(
    ctx: Context,
    plan: PlanLike,
    architecture: str = "pdd",
    n_requests: int | None = None,
    seed: int | None = None,
    trace: str | None = None,
    progress: Progress | None = None,
    window: int = WINDOW,
) -> SimResult:
    """Build the workload for ``plan`` (its sized rate; the scenario's trace or distributions)
    and simulate it. ``plan``: a Plan or one ArchitecturePlan.

    A line whose offered load reaches what it (and its connection pool) can carry has no steady
    state: its waits grow with the replay's length. Such a run longer than ``window`` requests
    is replayed again over the first ``window`` requests, so its figures are those of a stated
    window rather than of whatever length was asked for.

    A stable run's statistics leave out its warm-up: the requests before the one-sided MSER-5
    point of its TTFT and TPOT series (:mod:`pdd_plan.sim.warmup`), since it started with
    every queue empty. An unstable run keeps every request: the stated window from empty.

    The simulator's top stage: the context is read here, and the replay takes its pieces."""
    rs = ctx.replay_setup
    return replay_plan(rs, plan, architecture, n_requests, seed, trace, progress, window)


def replay_plan(
    rs: ReplaySetup,
    plan: PlanLike,
    architecture: str = "pdd",
    n_requests: int | None = None,
    seed: int | None = None,
    trace: str | None = None,
    progress: Progress | None = None,
    window: int = WINDOW,
) -> SimResult:
    """:func:`run` on the typed pieces a replay reads (`ReplaySetup`)."""
    p = setup.arch_plan(plan, architecture)
    s = rs.seed if seed is None else int(seed)
    reqs = setup.requests(rs, n_requests, s, p.goodput_rps, trace)
    return _replayed(rs, p, architecture, reqs, s, progress, window, trace)


def _replayed(rs, p, architecture, reqs, s, progress, window, trace=None) -> SimResult:
    res = replay_requests(rs, p, architecture, reqs, s, progress)
    if window and len(reqs) > window and res.unstable:
        reqs = setup.requests(rs, window, s, p.goodput_rps, trace)
        res = replay_requests(rs, p, architecture, reqs, s, progress)
    warmup = NONE_UNSTABLE if res.unstable else truncate([res.ttft_s, res.tpot_s])
    return dataclasses.replace(res, warmup=warmup)


def prepare() -> None:
    """What a process's first replay pays whatever the plan, paid ahead (`sim.worker`'s child
    does it while the parent plans): the engine constants' YAML read and validated, and the
    validators and serializers pydantic builds on first use for the profiles a replay dumps
    (instance keys) and copies (~40 ms of a first replay's ~75 ms on the development box), and
    the engines' limits file that bounds a replayed decode batch."""
    serving()
    engines()
    for cls in (GPUProfile, ModelProfile, SLA):
        cls.model_rebuild()


def verify(
    rs: ReplaySetup,
    plan: PlanLike,
    architecture: str,
    n_requests: int = 20_000,
    seed: int | None = None,
    stop_early: bool = True,
    stage_requests: int = 0,
) -> Verdict:
    """Simulate one architecture's plan and check it against the scenario's SLA.

    With ``stop_early`` the replay stops at a look (:mod:`pdd_plan.sim.sequential`) where
    every check's verdict is settled at the stated confidence; its figures are then over the
    requests the look saw, and ``early_stop`` says where it stopped. Otherwise (or when no
    look settles) the whole ``n_requests`` are replayed, as without it.

    ``plan`` is a :class:`Plan` or one :class:`ArchitecturePlan`. Returns the
    :class:`~pdd_plan.sim.verdict.Verdict`: its ``figures`` the :meth:`SimResult.summary`;
    its ``checks`` ``ttft_p90`` / ``ttft_p99`` (simulated TTFT percentile vs
    ``sla.ttft_p90_s`` / ``sla.ttft_p99_s``) and ``tpot_p90`` (simulated per-request TPOT P90
    vs ``sla.tpot_ms``); ``sla_met`` when all are ok; ``tail_breakdown_s``, the mean prefill
    wait, prefill, KV transfer and decode wait of the kept requests (past the warm-up) at or
    above the simulated TTFT P90 (where the time goes in the tail); ``bottleneck`` None when
    the SLA is met, else which cap to tighten: ``"prefill"`` (prefill utilization),
    ``"line"`` (line utilization), or ``"decode"`` (decode batch / utilization; also when
    only TPOT fails).

    ``stage_requests`` (more than the replay's): its TTFT figures, and the checks on them, are
    the prefill stage replayed over up to that many requests composed with the rest of each
    replayed first token (:mod:`pdd_plan.sim.tails`); where the replay stops is still its
    own rule's (the look compares its own point verdicts).
    """
    return verify_replay(rs, plan, architecture, n_requests, seed, stop_early, stage_requests)[0]


def verify_replay(
    rs: ReplaySetup,
    plan: PlanLike,
    architecture: str,
    n_requests: int = 20_000,
    seed: int | None = None,
    stop_early: bool = True,
    stage_requests: int = 0,
) -> tuple[Verdict, SimResult]:
    """:func:`verify`'s figures and the replay they are over (the requests it saw, its warm-up
    marked): the report draws its CDF from the very replay whose percentiles the plan states."""
    p = setup.arch_plan(plan, architecture)
    s = rs.seed if seed is None else int(seed)
    reqs = setup.requests(rs, n_requests, s, p.goodput_rps)
    stage = _stage(rs, p, architecture, reqs, s, stage_requests)
    if stop_early:
        for share in sequential.LOOKS:
            got = _look(rs, p, architecture, reqs, s, int(len(reqs) * share), stage)
            if got is not None:
                return got
    res = _replayed(rs, p, architecture, reqs, s, None, WINDOW)
    return checked(rs, res, stage), res


def recomposed(
    rs: ReplaySetup,
    plan: PlanLike,
    architecture: str,
    plain: tuple[Verdict, SimResult],
    n_requests: int,
    seed: int | None,
    stage_requests: int,
) -> Verdict:
    """:func:`verify` with ``stage_requests`` from the same call's plain ``verify_replay``
    (stage 0): the replay is the same (where it stops is its own rule's), only the figures
    and checks are composed, so this is that verdict without replaying again."""
    p = setup.arch_plan(plan, architecture)
    s = rs.seed if seed is None else int(seed)
    v, res = plain
    reqs = setup.requests(rs, n_requests, s, p.goodput_rps)
    stage = _stage(rs, p, architecture, reqs, s, stage_requests)
    if stage is None:
        return v
    return dataclasses.replace(checked(rs, res, stage), early_stop=v.early_stop)


def _stage(
    rs: ReplaySetup, p, architecture: str, reqs, s: int, most: int
) -> tails.StageWaits | None:
    """The prefill stage replayed over :func:`tails.stage_length` requests, at most
    ``most`` (:mod:`pdd_plan.sim.tails`), or None: not asked for, no longer than the replay,
    or a trace (its requests are all there is to replay)."""
    n = len(reqs)
    if int(most) <= n or rs.workload.trace is not None:
        return None
    fl = setup.fleet(rs.profiles, rs.file, p, architecture)
    rho, cs2 = tails.load(rs, fl, reqs)
    m = min(int(most), tails.stage_length(n, rho, cs2, rs.workload.arrival_cv**2))
    if m <= n:
        return None
    return tails.stage_waits(rs, fl, p.goodput_rps, m, s)


def _checks(rs: ReplaySetup, res: SimResult) -> list[sequential.Check]:
    k = res.kept()
    sla = rs.sla
    ttft, tpot = res.ttft_s[k], res.tpot_s[k] * 1e3
    return [
        sequential.Check("ttft_p90", ttft, 0.90, sla.ttft_p90_s),
        sequential.Check("ttft_p99", ttft, 0.99, sla.ttft_p99_s),
        sequential.Check("tpot_p90", tpot, 0.90, sla.tpot_ms),
    ]


def _look(
    rs: ReplaySetup, p, architecture: str, reqs, s: int, upto: int, stage=None
) -> tuple[Verdict, SimResult] | None:
    """The verdict at one look (see :mod:`pdd_plan.sim.sequential`), or None when it is not
    settled there (or the look cannot be taken: too few requests, an unstable line, no
    steady state in what it saw)."""
    if upto >= len(reqs) or not sequential.worth_a_look(p, reqs.req, upto):
        return None
    res = replay_requests(rs, p, architecture, reqs, s, None, upto)
    if res.unstable:
        return None  # no steady state: the full replay states its window
    n = sequential.exact_prefix(res.dec.end_s, float(reqs.req.arrival_s[upto]))
    head = res.head(n)
    warmup = truncate([head.ttft_s, head.tpot_s])
    if not warmup.settled:
        return None
    seen = dataclasses.replace(head, warmup=warmup)
    k = seen.kept()
    batch = math.ceil(sequential.in_system(seen.arrival_s[k], seen.e2e_s[k]))
    checks = _checks(rs, seen)
    tail = sequential.level(len(checks))
    verdicts = {c.name: sequential.settled(c, batch, tail) for c in checks}
    if any(x is None for x in verdicts.values()):
        return None
    v = checked(rs, seen)
    if any(verdicts[c] != v.checks[c].ok for c in verdicts):
        return None  # the point verdict on the other side (interpolation at the edge): go on
    if stage is not None:  # stopped by the replay's own rule; the figures are composed
        v = checked(rs, seen, stage)
    stop = EarlyStop(int(upto), int(len(reqs)), 1.0 - sequential.ALPHA)
    return dataclasses.replace(v, early_stop=stop), seen


def checked(rs: ReplaySetup, res: SimResult, stage: tails.StageWaits | None = None) -> Verdict:
    """A replay's verdict: its summary with its SLA checks, tail breakdown and bottleneck
    (see verify). With ``stage`` (a long replay of the prefill stage) the TTFT figures, and
    the checks on them, are the stage's waits composed with the rest of each replayed
    request's first token (:mod:`pdd_plan.sim.tails`); a replay with no steady state keeps
    its own (its stated window from empty)."""
    s = res.summary()
    if stage is not None and not s.get("unstable") and not res.unstable:
        s.update(composed_summary(res, stage, s))
    sla = rs.sla
    checks = {
        "ttft_p90": Check.of(s["ttft_s"]["p90"], sla.ttft_p90_s),
        "ttft_p99": Check.of(s["ttft_s"]["p99"], sla.ttft_p99_s),
        "tpot_p90": Check.of(s["tpot_ms"]["p90"], sla.tpot_ms),
    }
    k = res.kept()
    ttft = res.ttft_s[k]
    tail = ttft >= np.percentile(ttft, 90)
    dec = res.dec
    parts = {
        "prefill_wait": (res.prefill_start_s - res.arrival_s)[k],
        "prefill": res.prefill_s[k],
        "kv_transfer": res.kv_transfer_s[k],
        "decode_wait": (dec.md_admit_s - dec.md_arrive_s)[k],
    }
    brk: dict[str, float | None] = {
        k: sig(float(np.nanmean(v[tail])) if np.any(~np.isnan(v[tail])) else 0.0)
        for k, v in parts.items()
    }
    met = all(c.ok for c in checks.values())
    bottleneck = None
    if not met:
        if not (checks["ttft_p90"].ok and checks["ttft_p99"].ok):
            q = {
                "prefill": brk["prefill_wait"] or 0.0,
                "line": brk["kv_transfer"] or 0.0,
                "decode": brk["decode_wait"] or 0.0,
            }
            bottleneck = max(q, key=q.get)  # type: ignore[arg-type]
        else:
            bottleneck = "decode"
    return Verdict(met, bottleneck, checks, brk, s)


def composed_summary(res: SimResult, stage: tails.StageWaits, s: dict) -> dict:
    """The summary keys the composition replaces: ``ttft_s`` (its percentiles and mean),
    ``ttft_s_ci`` (sectioning intervals), ``unsettled`` (again, on those intervals) and
    ``tails`` (what the TTFT figures are)."""
    rest = _rest(res)
    c = tails.composed(stage.waits, rest)
    ttft = {f"p{round(q * 100)}": sig(v) for q, v in zip(tails.QS, c.points)}
    ttft["mean"] = sig(c.mean)
    ci = {f"p{round(q * 100)}": [sig(lo), sig(hi)] for q, lo, hi in zip(tails.QS, c.lo, c.hi)}
    unsettled = sequential.unsettled(
        {"ttft_s": ci, "tpot_ms": s["tpot_ms_ci"]}, {"ttft_s": ttft, "tpot_ms": s["tpot_ms"]}
    )
    how = {
        "method": tails.METHOD,
        "prefill_stage_requests": stage.requests,
        "prefill_stage_warmup": stage.warmup,
        "rest_requests": int(rest.size),
    }
    return {"ttft_s": ttft, "ttft_s_ci": ci, "unsettled": unsettled, "tails": how}


def _rest(res: SimResult) -> np.ndarray:
    """Each kept request's first token less its prefill wait (what the stage's wait adds to)."""
    return (res.ttft_s - (res.prefill_start_s - res.arrival_s))[res.kept()]


def composed_ttft(
    rs: ReplaySetup,
    plan: PlanLike,
    architecture: str,
    res: SimResult,
    n_requests: int,
    seed: int | None,
    stage_requests: int,
    k: int = 2000,
) -> np.ndarray | None:
    """The TTFT law `recomposed` states for `res` (a `verify_replay` of these arguments), as
    an even sample of `k` (`tails.composed_sample`); None where no stage applies."""
    p = setup.arch_plan(plan, architecture)
    s = rs.seed if seed is None else int(seed)
    reqs = setup.requests(rs, n_requests, s, p.goodput_rps)
    stage = _stage(rs, p, architecture, reqs, s, stage_requests)
    if stage is None:
        return None
    return tails.composed_sample(stage.waits, _rest(res), k)
