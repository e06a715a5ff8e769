"""Verification with stationary TTFT tails, run ahead on the replays' own verdicts and settled
later (`optimize.verify.verified_all`'s `speculate`).

A verification whose TTFT figures compose a long prefill-stage replay (`sim.tails`) costs
that stage (~0.3-0.5 s per 1M requests here) before each verdict. Its verdicts nearly always
agree with the plain replay's, so the planner runs the rounds on the plain verdicts and hands
the composed replays of every round to the replay child, which runs them while the caller
goes on (the uncertainty draws). `Pending.settle` then takes each round's composed verdict:

* every round's (SLA met, bottleneck) the same as its plain replay's: the rounds, the fleets
  and every figure derived from them are those the composed verdicts would have given, so the
  plan is the same; each verified plan's `simulated` takes its final composed verdict (its
  TTFT figures, intervals, checks), exactly as verifying with the stage throughout makes it;
* any round different, or an architecture the replays left without a plan whose reason quotes
  figures the stage would compose: None, and the caller plans again with the stage in every
  verdict (`optimize(..., tail_requests=...)`).

So the plan is byte for byte the one the composed verdicts give, whichever way it was reached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pdd_plan.architectures import LINE_BASELINE
from pdd_plan.outputs.plan import Plan, Simulated
from pdd_plan.sim.verdict import Verdict

SIM_KEYS = (
    "ttft_s",
    "tpot_ms",
    "ttft_s_ci",  # each printed percentile's batch-means interval (sim.sequential)
    "tpot_ms_ci",
    "unsettled",  # the percentiles whose interval is wider than +-5%
    "tails",  # present where the TTFT figures compose a long prefill-stage replay (sim.tails)
    "kv_transfer_s",
    "line_utilization",
    "route_share",
    "rld_token_share",
    "goodput_rps",
    "warmup",  # the replay's first requests left out of the figures above
    "early_stop",  # where the replay stopped, its verdicts settled (sim.sequential)
)


def simulated_of(v: Verdict, history: list[dict]) -> Simulated:
    """A verified plan's `simulated`: the replay's figures (SIM_KEYS), its checks and the
    verification's rounds."""
    d = v.as_dict()
    sim = {k: d[k] for k in SIM_KEYS if k in d}
    sim.update(
        {
            "requests": d["requests"],  # replayed: a trace shorter than n_requests is all of it
            "sla_met": v.sla_met,
            "checks": d["checks"],
            "rounds": history,
        }
    )
    return Simulated.model_validate(sim)


@dataclass
class Pending:
    """The composed replays of every verification round, submitted to `sim` (a
    `sim.worker` Inline or Forked): by architecture, each round's plain verdict and the
    ticket of its composed replay."""

    sim: Any
    rounds: dict[str, list[tuple[Any, int]]]
    own: bool  # close `sim` when settled (a child started for these replays alone)

    @classmethod
    def of(cls, sim: Any, log: dict[str, list], stage: int, own: bool) -> Pending:
        rounds = {
            a: [(v, sim.submit(plan, a, stage)) for plan, v in entries if v is not None]
            for a, entries in log.items()
        }
        return cls(sim, rounds, own)

    def settle(self, plan: Plan) -> Plan | None:
        """`plan` with each verified plan's composed figures, or None where a composed
        verdict parts from its plain replay's (see the module doc)."""
        try:
            final = {}
            for a, rounds in self.rounds.items():
                for v, ticket in rounds:
                    w = self.sim.result(ticket)
                    if (w.sla_met, w.bottleneck) != (v.sla_met, v.bottleneck):
                        return None
                    final[a] = w
            for a, i in plan.infeasible.items():
                w = final.get(a)
                composed = w is not None and bool((w.figures or {}).get("tails"))
                if composed and any(r.kind == "replay_sla" for r in i.reasons):
                    return None  # its reason quotes the plain replay's figures: plan again
            plans = dict(plan.plans)
            for a, p in plan.plans.items():
                s = p.simulated
                if s is None or s.note or a not in final:
                    continue
                history = [r.model_dump() for r in s.rounds]
                plans[a] = p.model_copy(update={"simulated": simulated_of(final[a], history)})
            for a, p in plan.plans.items():
                s = p.simulated
                if s is not None and s.note:  # PDD runs CDC-PD's verified fleet, as replayed
                    c = plans[LINE_BASELINE]
                    if c.simulated is None:  # CDC-PD's plan was verified (its fleet is PDD's)
                        continue
                    note = {"note": s.note}
                    plans[a] = c.model_copy(
                        update={"simulated": c.simulated.model_copy(update=note)}
                    )
            return plan.model_copy(update={"plans": plans})
        finally:
            if self.own:
                self.sim.close()

    def close(self) -> None:
        if self.own:
            self.sim.close()
