"""SLA goodput of an existing fleet, per architecture: the analytic search, the simulator's
verification, and the figures at the goodput (cost, BCR, percentiles, path shares, and what
gives out first one step above). Returns a typed `Evaluation` (evaluate/result.py); the CLI
renders it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pdd_plan import architectures
from pdd_plan.evaluate import analytic, verify
from pdd_plan.evaluate.fleet import FleetSpec, deployed_inputs
from pdd_plan.evaluate.result import ArchitectureEvaluation, Evaluation, GivesOut
from pdd_plan.inputs.context import Context
from pdd_plan.inputs.pieces import ReplaySetup
from pdd_plan.optimize import owned, problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.problem import Problem
from pdd_plan.workload.classes import build_classes

# the simulator's bottleneck names as resources (analytic.RESOURCES)
SIM_RESOURCE = {"prefill": "prefill_queue", "line": "line", "decode": "decode_tpot"}
LIMIT_TEXT = {
    "prefill_queue": "prefill queue (utilization at its cap)",
    "ttft": "TTFT percentiles (prefill wait and KV transfer)",
    "decode_tpot": "decode tokens/s at the TPOT target",
    "kv_memory": "decode KV memory",
    "line": "line utilization",
    "relay": "relay decode",
}
LIMIT_FIELD = {
    "prefill_queue": "prefill",
    "ttft": "sla.ttft_p90_s",
    "decode_tpot": "sla.tpot_ms",
    "kv_memory": "main_decode",
    "line": "line",
    "relay": "relay_decode",
}


@dataclass(frozen=True)
class Options:
    simulate: bool = True
    sim_requests: int = 5000
    step: float = 0.02  # one step: this fraction of the rate
    max_replays: int = 8
    # each replay's TTFT figures and checks compose its prefill stage replayed alone over up
    # to this many requests (sim.tails; optimize's verification rule; 0: the replay's own)
    tail_requests: int = 0


class Infeasible(Exception):
    """An architecture's fleet meets the SLA at no rate: structured reasons."""

    def __init__(self, reasons: list[dict]):
        super().__init__(reasons[0]["message"])
        self.reasons = reasons


def reason(kind: str, message: str, field: str | None = None) -> dict:
    out = {"kind": kind, "message": message}
    if field is not None:
        out["field"] = field
    return out


def _require_roles(fs: FleetSpec, fm: analytic.FleetModel) -> None:
    spec = fm.spec
    if fm.n_prefill == 0:
        msg = f"the {spec.title} fleet has no prefill instances"
        raise Infeasible([reason("missing_role", msg, f"{fs.where}.instances")])
    role = spec.decode_role
    if not fm.md:
        if fm.slow:
            tpot = fm.pb.sla.tpot_ms
            msg = f"no {role} group meets TPOT {tpot:g} ms even at batch 1 ({', '.join(fm.slow)})"
            raise Infeasible([reason("tpot", msg, "sla.tpot_ms")])
        msg = f"the {spec.title} fleet has no {role} instances"
        raise Infeasible([reason("missing_role", msg, f"{fs.where}.instances")])


def _never(fs: FleetSpec, at: analytic.AtRate) -> Infeasible:
    k = at.first_limit
    lim = at.limits[k]
    field = LIMIT_FIELD[k]
    field = field if field.startswith("sla.") else f"{fs.where}.{field}"
    msg = (
        f"no rate meets the SLA: at {at.rate:.3g} req/s already {LIMIT_TEXT[k]} runs at "
        f"{lim:.2f}x its limit"
    )
    return Infeasible([reason(k, msg, field)])


def _quantiles(q: dict, keys: tuple[str, ...]) -> dict:
    return {k: q.get(k) for k in keys}


def _simulated(c: verify.VerifiedRates, n: int) -> dict:
    assert c.passed is not None  # a verified rate has a passing replay
    s: Any = c.passed.verdict.figures
    above = c.failed
    return {
        "requests": n,
        "goodput_rps": round(c.passed.rate, 4),
        "ttft_s": _quantiles(s["ttft_s"], ("p50", "p90", "p99")),
        "tpot_ms": _quantiles(s["tpot_ms"], ("p50", "p90")),
        "route_share": s["route_share"],
        "rld_token_share": s["rld_token_share"],
        "line_utilization": s.get("line_utilization"),
        "sla_attainment": s.get("sla_attainment"),
        "one_step_above": None
        if above is None
        else {
            "rate_rps": round(above.rate, 4),
            "failed_checks": above.failed_checks,
            "bottleneck": above.bottleneck,
        },
        "replays": [r.row() for r in c.runs],
        # how the TTFT figures were found, where they compose the prefill stage (sim.tails)
        **({"tails": s["tails"]} if s.get("tails") else {}),
    }


def _analytic(lo: analytic.AtRate, hi: analytic.AtRate) -> dict:
    p = lo.plan
    assert p is not None  # the search's lower end is a feasible plan
    return {
        "goodput_rps": round(lo.rate, 4),
        "ttft_s": p.ttft_s.model_dump(),
        "tpot_ms": p.tpot_ms.model_dump(),
        "route_share": p.route_share.model_dump(),
        "rld_token_share": p.rld_token_share,
        "prefill_utilization": p.prefill_utilization,
        "line_utilization": p.line.utilization if p.line is not None else None,
        "one_step_above": {
            "rate_rps": round(hi.rate, 4),
            "limits": {k: round(v, 4) for k, v in hi.limits.items()},
            "first_limit": hi.first_limit,
        },
    }


def _gives_out(a: dict, sim: dict | None) -> GivesOut:
    above = a["one_step_above"]
    if sim is not None and sim["one_step_above"] and sim["one_step_above"]["bottleneck"]:
        b = sim["one_step_above"]
        res = SIM_RESOURCE.get(b["bottleneck"], b["bottleneck"])
        lim = above["limits"]
        if res == "decode_tpot" and lim.get("kv_memory", 0) > lim.get("decode_tpot", 0):
            res = "kv_memory"
        return GivesOut(res, b["rate_rps"], "simulator")
    return GivesOut(above["first_limit"], above["rate_rps"], "analytic")


def owned_cost(prices: owned.OwnedPrices, fs: FleetSpec) -> tuple[float, float | None]:
    """$/hour of the fleet as optimize counts it: with the scenario's `owned:` section, owned
    GPUs and lines first at their own price and the rest at market (evaluate had costed a fleet
    planned on owned GPUs at market: $400/h against optimize's $160/h); (total, owned part),
    the part None without the section."""
    if not prices.declared:
        return fs.cost_per_hour, None
    per: dict[tuple[str, str], list[float]] = {}
    for g in fs.instances:
        acc = per.setdefault((g.datacenter, g.gpu), [0.0, 0.0])
        acc[0] += g.count * g.gpus_per_instance
        acc[1] += g.cost_per_hour
    mine = new = 0.0
    for key, (n, market) in sorted(per.items()):
        o, b = owned.gpu_cost(owned.gpus(prices).get(key), int(n), market)
        mine, new = mine + o, new + b
    ln = fs.line
    if ln is not None and ln.count > 0:
        have = owned.lines(prices).get(ln.sku, (0, 0.0))
        k = min(ln.count, have[0])
        mine += k * have[1]
        new += (ln.count - k) * ln.cost_per_hour / ln.count
    return mine + new, mine


def evaluate_one(
    pb: Problem, rs: ReplaySetup, fs: FleetSpec, classes, opt: Options
) -> ArchitectureEvaluation:
    """One architecture's SLA goodput on its fleet; Infeasible with reasons when none."""
    spec = architectures.get(fs.architecture)
    # the deployment's speed: the analytic search and every replay alike
    pb, rs = deployed_inputs(pb, rs, fs.speed_factor)
    # decode up to its TPOT-target batch: search.decode_utilization is the planner's headroom
    # when it sizes a fleet, not part of the SLA an existing fleet is measured against (with it
    # the search stopped 10% short wherever decode binds, as the replay showed)
    caps = Caps(decode=1.0)
    fm = analytic.fleet_model(pb, fs, classes, caps)
    _require_roles(fs, fm)
    lo, hi = analytic.search(fm)
    if not lo.ok:
        raise _never(fs, lo)
    assert lo.plan is not None  # a feasible lower end has its plan
    an = _analytic(lo, hi)
    sim = None
    goodput = lo.rate
    if opt.simulate:
        stable = analytic.stability_bound(fm)
        at = analytic.at_rate(fm, stable)
        rep = verify.replayer(
            rs, lo.plan, fs.architecture, opt.sim_requests, stable, at.first_limit,
            opt.tail_requests,
        )  # fmt: skip
        c = verify.verify_rates(rep, lo.rate, opt.step, opt.max_replays)
        if c.passed is None:
            last = c.runs[-1]
            msg = (
                f"the simulator replay misses the SLA at every rate tried, down to "
                f"{last.rate:.3g} req/s (analytic goodput {lo.rate:.3g} req/s; bottleneck: "
                f"{last.bottleneck})"
            )
            raise Infeasible([reason("replay_sla", msg, "sla.ttft_p99_s")])
        sim = _simulated(c, opt.sim_requests)
        goodput = c.passed.rate
    cost, mine = owned_cost(pb.owned, fs)
    head = sim or an
    return ArchitectureEvaluation(
        title=spec.title,
        goodput_rps=round(goodput, 4),
        cost_per_hour=round(cost, 2),
        cost_owned_per_hour=None if mine is None else round(mine, 2),
        # the optimizer's BCR: requests served per dollar (goodput x 3600 / $ per hour)
        bcr=round(goodput * 3600.0 / cost, 4) if cost > 0 else None,
        ttft_s=head["ttft_s"],
        tpot_ms=head["tpot_ms"],
        route_share=head["route_share"],
        rld_token_share=head["rld_token_share"],
        gives_out_first=_gives_out(an, sim),
        fleet={
            "from": fs.where,
            "speed_factor": fs.speed_factor,
            "instances": [g.model_dump() for g in fs.instances],
            "line": None
            if fs.line is None
            else {
                "sku": fs.line.sku,
                "count": fs.line.count,
                "cost_per_hour": fs.line.cost_per_hour,
            },
            "unused": [g.model_dump() for g in fs.unused],
        },
        analytic=an,
        simulated=sim,
    )


def evaluate(ctx: Context, fleets: dict[str, FleetSpec], opt: Options | None = None) -> Evaluation:
    """Every architecture's SLA goodput on its fleet (see the module doc). The top stage: the
    context is read here, once, into the planner's and the replay's typed inputs."""
    opt = opt or Options()
    cls = build_classes(ctx.class_spec)
    sc = ctx.scenario
    pb, rs = problem_of(ctx), ctx.replay_setup
    done: dict[str, ArchitectureEvaluation] = {}
    infeasible: dict[str, dict] = {}
    for a, fs in fleets.items():
        try:
            done[a] = evaluate_one(pb, rs, fs, cls, opt)
        except Infeasible as e:
            infeasible[a] = {"reasons": e.reasons}
    return Evaluation(
        scenario=sc.name,
        model=ctx.model.name,
        sla=sc.sla.model_dump(),
        step=opt.step,
        sim_requests=opt.sim_requests if opt.simulate else None,
        seed=sc.seed,
        architectures=done,
        infeasible=infeasible,
    )
