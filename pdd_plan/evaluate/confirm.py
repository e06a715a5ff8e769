"""The analytic goodput checked by the simulator: replay the fleet at that rate and one step
above; where the replay disagrees, move the rate by simulated bisection, a bounded number of
replays. The same requests (one seed) at every rate, so a rate's verdict is deterministic.

No rate at or above the stability limit (prefill, line or decode at 100% utilization) is
replayed: there the queues grow without bound, and a finite replay's percentiles would only
measure how long it ran. Such a rate fails, its bottleneck the saturated resource."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pdd_plan.inputs.pieces import ReplaySetup
from pdd_plan.inputs.schema.plan import ArchitecturePlan


@dataclass(frozen=True)
class Replay:
    """One simulator run of the fleet at `rate` (summary None: not run, past stability)."""

    rate: float
    sla_met: bool
    bottleneck: str | None
    summary: dict | None = None

    @property
    def failed_checks(self) -> list[str]:
        if self.summary is None:
            return []
        return [k for k, v in self.summary["checks"].items() if not v["ok"]]

    def row(self) -> dict:
        c = self.summary["checks"] if self.summary else None
        return {
            "rate_rps": round(self.rate, 4),
            "sla_met": self.sla_met,
            "ttft_p90_s": c["ttft_p90"]["simulated"] if c else None,
            "ttft_p99_s": c["ttft_p99"]["simulated"] if c else None,
            "tpot_p90_ms": c["tpot_p90"]["simulated"] if c else None,
            "bottleneck": self.bottleneck,
            **({} if c else {"note": "past the stability limit: not replayed"}),
        }


@dataclass
class Confirmed:
    """The highest replayed rate that met the SLA (None: none did) and the lowest that did not."""

    passed: Replay | None
    failed: Replay | None
    runs: list[Replay] = field(default_factory=list)


def replayer(
    rs: ReplaySetup,
    plan: ArchitecturePlan,
    architecture: str,
    n_requests: int,
    stable_below: float,
    saturates: str,
) -> Callable[[float], Replay]:
    """Replays of `plan`'s fleet at any rate (the plan's figures other than the rate unused);
    rates from `stable_below` on fail unreplayed, `saturates` named as the bottleneck."""

    def run(rate: float) -> Replay:
        if rate >= stable_below:
            return Replay(rate, False, saturates)
        # the simulator (~0.02 s of imports) when a replay runs: a plan's uncertainty block
        # and `evaluate` without --confirm reach this module and replay nothing
        from pdd_plan.sim.run import verify

        p = plan.model_copy(update={"goodput_rps": float(rate)})
        v = verify(rs, p, architecture, n_requests, rs.seed)
        return Replay(rate, bool(v["sla_met"]), v["bottleneck"], v)

    return run


def confirm(
    replay: Callable[[float], Replay], rate: float, step: float = 0.02, max_runs: int = 8
) -> Confirmed:
    """Replay at `rate` and `rate * (1 + step)`. If `rate` fails, step down (1, 2, 4... steps)
    until a rate passes; if the step above passes, step up likewise; then bisect the bracket
    down to one step. At most `max_runs` replays."""
    out = Confirmed(None, None)

    def run(r: float) -> bool:
        rep = replay(r)
        out.runs.append(rep)
        if rep.sla_met and (out.passed is None or r > out.passed.rate):
            out.passed = rep
        if not rep.sla_met and (out.failed is None or r < out.failed.rate):
            out.failed = rep
        return rep.sla_met

    up = run(rate)
    k = 0
    while len(out.runs) < max_runs:
        lo = out.passed.rate if out.passed else 0.0
        hi = out.failed.rate if out.failed else None
        if hi is not None and out.passed is not None:
            if hi <= lo * (1 + step) * (1 + 1e-9):
                break  # bracketed to one step
            r = 0.5 * (lo + hi)
        elif up:  # everything so far passed: climb
            r = rate * (1 + step * 2**k)
            k += 1
        else:  # everything failed: descend
            r = rate * (1 - step * 2**k)
            k += 1
            if r <= 0:
                break
        run(r)
    return out
