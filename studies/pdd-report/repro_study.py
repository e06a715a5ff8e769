"""The reproduction's computations: evaluate the report's fleets, then replay them at one load
(the report compares TTFT at one load), each routing and each place of decode, and price the
handoff. Returns plain dicts; reproduce.py prints them and writes docs/reproduction.md."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from repro_figures import HANDOFF_CONTEXT, HANDOFF_TOKENS, REPORT_GPUS

from pdd_plan.evaluate import Options, analytic, evaluate
from pdd_plan.evaluate.fleet import FleetSpec, deployed_inputs, from_scenario, instance
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.latency import handoff
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.optimize.search.enumeration import mean_context
from pdd_plan.outputs.plan import ArchitecturePlan, InstanceGroup, LineChoice, Routing
from pdd_plan.perf import layers
from pdd_plan.perf.handoff import joined_extend
from pdd_plan.sim.run import replay_plan
from pdd_plan.workload.classes import build_classes

ARCHS = ("pdd", "cdc_pd", "idc_pd")
ROUTERS = ("hit_threshold", "plan")  # the report's rule (the file's), the planner's


def _pct(new: float, old: float) -> float:
    return 100.0 * (new / old - 1.0)


def load(path: Path, line: Path | None = None, router: str | None = None):
    """(context, fleets) of the file; `line`: a line profile in place of its candidates;
    `router`: `policy.router` in place of the file's."""
    sc = load_scenario(path)
    if line is not None:
        sc = sc.model_copy(update={"link": sc.link.model_copy(update={"candidates": [str(line)]})})
    if router is not None:
        sc = sc.model_copy(update={"policy": sc.policy.model_copy(update={"router": router})})
    return from_scenario(build_context(sc, str(path)))


@dataclasses.dataclass
class Fleet:
    """One architecture's fleet as deployed: the planner's and the replay's inputs at its
    speed, its analytic model, and a plan of its own (None: no rate meets the SLA)."""

    fs: FleetSpec
    pb: object
    rs: object
    fm: analytic.FleetModel
    plan: ArchitecturePlan | None


def fleet(ctx, fs: FleetSpec) -> Fleet:
    pb, rs = deployed_inputs(problem_of(ctx), ctx.replay_setup, fs.speed_factor)
    fm = analytic.fleet_model(pb, fs, build_classes(ctx.class_spec), Caps(decode=1.0))
    lo, _ = analytic.search(fm) if fm.md and fm.n_prefill else (None, None)
    return Fleet(fs, pb, rs, fm, lo.plan if lo is not None and lo.ok else None)


def replayable(f: Fleet, template: ArchitecturePlan, rate: float, local: bool = False):
    """A plan of `f`'s own fleet to replay at `rate`: its groups and line, the routing of its
    own plan (of `template`'s when it has none: a routing the simulator may ignore, see
    `policy.router`). `local`: main decode moved into the prefill datacenter (no line)."""
    groups = [InstanceGroup.model_validate(g.model_dump()) for g in f.fs.instances]
    line = f.fs.line
    if local:
        home = next(g.datacenter for g in groups if g.role == "prefill")
        groups = [g.model_copy(update={"datacenter": home}) for g in groups]
        line = None
    elif line is not None:
        sku = next(s for s in f.pb.lines if s.name == line.sku)
        line = LineChoice(
            sku=sku.name,
            gbps=sku.gbps,
            count=line.count,
            cost_per_hour=line.cost_per_hour,
            utilization=0.0,
            rtt_ms=sku.rtt_ms,
        )
    routing = (f.plan or template).routing if f.fm.rld else Routing()
    up = {"instances": groups, "line": line, "goodput_rps": float(rate), "routing": routing}
    return template.model_copy(update=up)


def replay(f: Fleet, plan: ArchitecturePlan, arch: str, n: int) -> dict:
    """The replay's summary, and the relay pool's mean batch over its TPOT-target batch."""
    res = replay_plan(f.rs, plan, arch, n, f.rs.seed)
    s = res.summary()
    batches = s["utilization"]["decode_batch"]
    relay = batches[len(batches) - res.relay_count :] if res.relay_count else []
    s["rld_load"] = sum(relay) / len(relay) if relay else None
    return s


def _percentiles(s: dict) -> dict:
    keys = ("p50", "p90", "p99")
    return {
        "ttft_s": {k: s["ttft_s"][k] for k in keys},
        "kv_transfer_s": {k: (s["kv_transfer_s"] or {}).get(k) for k in keys},
        "rld_token_share_pct": 100.0 * float(s["rld_token_share"] or 0.0),
        "route_share": s["route_share"],
        "rld_load": s["rld_load"],
        "goodput_rps": s["goodput_rps"],
    }


def extend_prediction(f: Fleet, choice: handoff.Choice | None) -> dict:
    """The microbenchmark's recompute handoff on PDD's main decode: 100 tokens at 64K context
    joined to the running batch at its TPOT-target size (the most a busy main decode runs)."""
    g = next(g for g in f.fs.instances if g.role == "main_decode")
    md = instance(f.rs.profiles, "", g, "fleet")
    ctx = mean_context(f.fm.classes)
    tpot = f.pb.sla.tpot_ms / 1e3
    batch, _ = analytic.max_batch_for_tpot(md, ctx, tpot)
    j = joined_extend(md, HANDOFF_TOKENS, HANDOFF_CONTEXT, batch, ctx)
    out = {
        "batch": batch,
        "step_ms": 1e3 * j.step_s,
        "pass_ms": 1e3 * j.pass_s,
        "mean_ms": 1e3 * j.mean_s,
        "max_ms": 1e3 * j.max_s,
        "sd_ms": 1e3 * j.sd_s,
    }
    if f.fm.line is not None:
        kv = handoff.kv(md, HANDOFF_TOKENS, f.fm.line, 0.0)[0]
        out["kv_payload_bytes"] = float(layers.kv_bytes(md.model, HANDOFF_TOKENS))
        out["kv_mean_ms"], out["kv_p99_ms"] = 1e3 * kv.mean_s, 1e3 * kv.worst_s
    if choice is not None:
        out["payload"], out["payload_why"] = choice.payload, choice.why
    return out


def payload_choice(f: Fleet, rate: float) -> handoff.Choice | None:
    """What the planner chooses for PDD's handoff at `rate` (the line at its load there)."""
    if f.fm.line is None or not f.fm.md:
        return None
    g = next(g for g in f.fs.instances if g.role == "main_decode")
    md = instance(f.rs.profiles, "", g, "fleet")
    ctx = mean_context(f.fm.classes)
    batch, _ = analytic.max_batch_for_tpot(md, ctx, f.pb.sla.tpot_ms / 1e3)
    fm = f.fm  # the line's utilization at `rate`: the KV bytes crossing over its capacity
    rho = rate * float(np.dot(fm.classes.weight, fm.shared.line_bytes)) / fm.line.capacity_bytes_s
    chunk = f.pb.catalog.prefill_chunk_tokens
    return handoff.choose(f.pb.policy, md, ctx, batch, chunk, fm.line, rho)


def _report_cost(ctx, gpus: dict[str, int], line_per_hour: float = 0.0) -> float:
    """$/hour of the report's GPU counts at the scenario's prices (and a line)."""
    return sum(n * ctx.gpus[g].price.usd_per_gpu_hour for g, n in gpus.items()) + line_per_hour


def headline(ctx, ev: dict, at_load: dict) -> dict:
    """The pdd_plan figures beside the report's: the evaluate goodputs, cost and BCR; TTFT at
    the compared load (`at_load`: replay summaries by name)."""
    a, inf = ev["architectures"], ev["infeasible"]
    pdd, idc = a.get("pdd"), a.get("idc_pd")
    cdc = at_load["cdc_pd"]["ttft_s"]
    mine = at_load["pdd"]["ttft_s"]
    out = {
        "idc_goodput": idc["goodput_rps"] if idc else None,
        "pdd_goodput": pdd["goodput_rps"] if pdd else None,
        "cdc_ttft_p90_s": cdc["p90"],
        "pdd_ttft_p90_s": mine["p90"],
        "cdc_ttft_p99_s": cdc["p99"],
        "pdd_ttft_p99_s": mine["p99"],
        "ttft_p90_change_pct": _pct(mine["p90"], cdc["p90"]),
        "ttft_p99_change_pct": _pct(mine["p99"], cdc["p99"]),
        "rld_token_share_pct": at_load["pdd"]["rld_token_share_pct"],
        "cdc_ttft_p50_s": cdc["p50"],
        "local_ttft_p50_s": at_load["local"]["ttft_s"]["p50"],
        "kv_transfer_p50_s": at_load["pdd"]["kv_transfer_s"]["p50"],
        "kv_transfer_p99_s": at_load["pdd"]["kv_transfer_s"]["p99"],
    }
    if pdd and idc:
        line = pdd["fleet"]["line"]["cost_per_hour"] if pdd["fleet"]["line"] else 0.0
        out["goodput_gain_pct"] = _pct(pdd["goodput_rps"], idc["goodput_rps"])
        out["cost_change_pct"] = _pct(pdd["cost_per_hour"], idc["cost_per_hour"])
        out["bcr_gain_pct"] = _pct(pdd["bcr"], idc["bcr"])
        out["bcr_gain_pct_at_report_gpu_counts"] = _pct(
            pdd["goodput_rps"] / _report_cost(ctx, REPORT_GPUS["pdd"], line),
            idc["goodput_rps"] / _report_cost(ctx, REPORT_GPUS["idc_pd"]),
        )
    else:  # no SLA goodput on one side: no gain to state
        for k in ("goodput_gain_pct", "cost_change_pct", "bcr_gain_pct"):
            out[k] = None
    out["infeasible"] = {k: k in inf for k in ARCHS}
    return out


def run(path: Path, requests: int, line: Path | None = None) -> dict:
    """Evaluate, then replay at the compared load: PDD under each routing, CDC-PD, and CDC-PD
    with main decode in the prefill datacenter (the report's P50 comparison)."""
    ctx, fleets = load(path, line)
    ev = evaluate(ctx, fleets, Options(sim_requests=requests)).as_dict()
    a = ev["architectures"]
    fl = {k: fleet(ctx, fs) for k, fs in fleets.items()}
    template = next((f.plan for f in fl.values() if f.plan is not None), None)
    load_rps = next((a[k]["goodput_rps"] for k in ("pdd", "cdc_pd", "idc_pd") if k in a), None)
    if template is None or load_rps is None:
        return {"evaluate": ev, "load_rps": None, "at_load": {}}
    at_load = {}
    for router in ROUTERS:
        rctx, rfleets = load(path, line, router)
        f = fleet(rctx, rfleets["pdd"])
        at = analytic.at_rate(f.fm, load_rps)
        f.plan = at.plan if at.ok else f.plan
        at_load[f"pdd:{router}"] = _percentiles(
            replay(f, replayable(f, template, load_rps), "pdd", requests)
        )
    file_router = load_scenario(path).policy.router
    at_load["pdd"] = at_load.get(f"pdd:{file_router}") or at_load["pdd:plan"]
    c = fl["cdc_pd"]
    at_load["cdc_pd"] = _percentiles(
        replay(c, replayable(c, template, load_rps), "cdc_pd", requests)
    )
    at_load["local"] = _percentiles(
        replay(c, replayable(c, template, load_rps, local=True), "cdc_pd", requests)
    )
    choice = payload_choice(fl["pdd"], load_rps)
    return {
        "evaluate": ev,
        "load_rps": load_rps,
        "at_load": at_load,
        "headline": headline(ctx, ev, at_load),
        "extend": extend_prediction(fl["pdd"], choice),
        "speed_factor": {k: fs.speed_factor for k, fs in fleets.items()},
    }


# The report's own GPU counts as instances the model fits: in pdd-plan's weight accounting a
# DeepSeek-V4-Pro instance needs 16 H100 or more, so 43 H100 are two instances (a 27-GPU
# prefill and a 16-GPU relay decode: the smallest relay pool, the rest prefill) and 88 H100
# are IDC-PD's two 16-GPU prefill instances and 56 GPUs of decode as two of 28.
EXACT = {
    "all": {"prefill": (1, 27), "relay_decode": (1, 16)},
    "idc_pd": {"prefill": (2, 16), "decode": (2, 28)},
}


def exact_counts(path: Path, requests: int, line: Path | None = None) -> dict:
    """PDD and IDC-PD evaluated on the report's exact GPU counts (EXACT), at the file's speed
    factor (fitted on the 96-GPU IDC-PD, not refitted): goodputs, costs, the gains."""
    sc = load_scenario(path)
    if line is not None:
        sc = sc.model_copy(update={"link": sc.link.model_copy(update={"candidates": [str(line)]})})
    fleet = dict(sc.fleet)
    for key, roles in EXACT.items():
        groups = [
            g.model_copy(update={"count": roles[g.role][0], "gpus_per_instance": roles[g.role][1]})
            if g.role in roles
            else g
            for g in fleet[key].instances
        ]
        fleet[key] = fleet[key].model_copy(update={"instances": groups})
    sc = sc.model_copy(update={"fleet": fleet, "architectures": ["pdd", "idc_pd"]})
    ctx, fleets = from_scenario(build_context(sc, str(path)))
    ev = evaluate(ctx, fleets, Options(sim_requests=requests)).as_dict()
    a = ev["architectures"]
    out = {
        a_: {
            "gpus": {
                g.gpu: sum(
                    x.count * x.gpus_per_instance for x in fleets[a_].instances if x.gpu == g.gpu
                )
                for g in fleets[a_].instances
            },
            "goodput_rps": a[a_]["goodput_rps"] if a_ in a else None,
            "cost_per_hour": fleets[a_].cost_per_hour,
        }
        for a_ in ("pdd", "idc_pd")
    }
    if "pdd" in a and "idc_pd" in a:
        p, i = a["pdd"], a["idc_pd"]
        out["goodput_gain_pct"] = _pct(p["goodput_rps"], i["goodput_rps"])
        out["cost_change_pct"] = _pct(p["cost_per_hour"], i["cost_per_hour"])
        out["bcr_gain_pct"] = _pct(p["bcr"], i["bcr"])
    return out
