"""Draws replayed in the simulator: a plan's fleet, request by request, under the models of
one draw, at the draw's rate; whether the replay meets the SLA.

The simulator builds its instances from the context's GPU profiles and its line from the
context's SKUs, so a draw's perf speed (one factor for both roles: the simulator has one set
of GPU profiles), line rate, the line's share of KV bytes and the per-request state (the
model it replays) reach it through `perturb.apply`'s context. Its requests come from the scenario's own distributions, so a
prefix-hit shift and the KV bytes held in decode memory do not: a draw that moves them (or
prefill and decode speed apart) is replayed with the part the simulator can take, and the
result says so (`partial`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pdd_plan.inputs.context import Context
from pdd_plan.inputs.pieces import Profiles
from pdd_plan.outputs.plan import ArchitecturePlan
from pdd_plan.sim.verdict import Verdict
from pdd_plan.uncertainty import paired, perturb
from pdd_plan.workload.requests import RequestClasses


@dataclass(frozen=True)
class Replayed:
    verdict: Verdict
    rate: float
    partial: bool  # some of the draw's inputs could not reach the simulator

    @property
    def sla_met(self) -> bool:
        return self.verdict.sla_met

    @property
    def bottleneck(self) -> str | None:
        return self.verdict.bottleneck


def replay(
    ctx: Context,
    classes: RequestClasses,
    plan: ArchitecturePlan,
    arch: str,
    values: dict[str, float],
    n_requests: int,
    seed: int,
) -> Replayed:
    """`plan`'s fleet replayed under the draw `values` at its planned rate x the draw's."""
    v = dict(values)
    partial = v.get("prefix_hit", 0.0) != 0.0 or v.get("kv_bytes", 1.0) != 1.0
    kp, kd = v.get("prefill_speed", 1.0), v.get("decode_speed", 1.0)
    if kp != kd:
        partial = True
        v["prefill_speed"] = v["decode_speed"] = min(kp, kd)
    v.pop("prefix_hit", None)
    ap = perturb.apply(paired.pb_of(ctx), classes, v)
    rate = float(plan.goodput_rps) * v.get("rate", 1.0)
    p = plan.model_copy(update={"goodput_rps": rate})
    prof = Profiles(
        ap.prefill.model, ap.prefill.catalog.gpus, ap.prefill.lines, ap.prefill.catalog.engine
    )
    rs = dataclasses.replace(ctx.replay_setup, profiles=prof)
    # the simulator (~0.02 s of imports) only with --verify-draws: a plan's block replays nothing
    from pdd_plan.sim.run import verify

    return Replayed(verify(rs, p, arch, n_requests, seed), rate, partial)
