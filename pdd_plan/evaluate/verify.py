"""The analytic goodput checked by the simulator: replay the fleet at that rate and one step
above; where the replay disagrees, move the rate by simulated bisection, a bounded number of
replays. The same requests (one seed) at every rate, so a rate's verdict is deterministic.

No rate at or above the stability limit (prefill, line or decode at 100% utilization) is
replayed: there the queues grow without bound, and a finite replay's percentiles would only
measure how long it ran. Such a rate fails, its bottleneck the saturated resource."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pdd_plan.inputs.pieces import ReplaySetup
from pdd_plan.outputs.plan import ArchitecturePlan
from pdd_plan.sim.verdict import Verdict


@dataclass(frozen=True)
class Replay:
    """One simulator run of the fleet at `rate`, and its verdict (not replayed past the
    stability limit: `Verdict.unreplayed`)."""

    rate: float
    verdict: Verdict

    @property
    def sla_met(self) -> bool:
        return self.verdict.sla_met

    @property
    def bottleneck(self) -> str | None:
        return self.verdict.bottleneck

    @property
    def failed_checks(self) -> list[str]:
        return self.verdict.failed_checks

    def row(self) -> dict:
        """The replay's row in evaluate's output."""
        v = self.verdict
        return {
            "rate_rps": round(self.rate, 4),
            "sla_met": v.sla_met,
            "ttft_p90_s": v.simulated("ttft_p90"),
            "ttft_p99_s": v.simulated("ttft_p99"),
            "tpot_p90_ms": v.simulated("tpot_p90"),
            "bottleneck": v.bottleneck,
            **({} if v.replayed else {"note": "past the stability limit: not replayed"}),
        }


@dataclass(frozen=True)
class VerifiedRates:
    """The highest replayed rate that met the SLA (None: none did), the lowest that did not,
    and every replay in the order run."""

    passed: Replay | None
    failed: Replay | None
    runs: tuple[Replay, ...] = ()


def replayer(
    rs: ReplaySetup,
    plan: ArchitecturePlan,
    architecture: str,
    n_requests: int,
    stable_below: float,
    saturates: str,
    stage_requests: int = 0,
) -> Callable[[float], Replay]:
    """Replays of `plan`'s fleet at any rate (the plan's figures other than the rate unused);
    rates from `stable_below` on fail unreplayed, `saturates` named as the bottleneck;
    `stage_requests`: `sim.run.verify`'s (the TTFT composed with the prefill stage)."""

    def run(rate: float) -> Replay:
        if rate >= stable_below:
            return Replay(rate, Verdict.unreplayed(saturates))
        # the simulator (~0.02 s of imports) when a replay runs: a plan's uncertainty block
        # and `evaluate --no-simulate` reach this module and replay nothing
        from pdd_plan.sim.run import verify

        p = plan.model_copy(update={"goodput_rps": float(rate)})
        return Replay(
            rate, verify(rs, p, architecture, n_requests, rs.seed, stage_requests=stage_requests)
        )

    return run


def verify_rates(
    replay: Callable[[float], Replay], rate: float, step: float = 0.02, max_runs: int = 8
) -> VerifiedRates:
    """Replay at `rate` and `rate * (1 + step)`. If `rate` fails, step down (1, 2, 4... steps)
    until a rate passes; if the step above passes, step up likewise; then bisect the bracket
    down to one step. At most `max_runs` replays."""
    runs: list[Replay] = []

    def passed() -> Replay | None:
        return max((r for r in runs if r.sla_met), key=lambda r: r.rate, default=None)

    def failed() -> Replay | None:
        return min((r for r in runs if not r.sla_met), key=lambda r: r.rate, default=None)

    def run(r: float) -> bool:
        runs.append(replay(r))
        return runs[-1].sla_met

    up = run(rate)
    k = 0
    while len(runs) < max_runs:
        lo_rep, hi_rep = passed(), failed()
        lo = lo_rep.rate if lo_rep else 0.0
        hi = hi_rep.rate if hi_rep else None
        if hi is not None and lo_rep is not None:
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
    return VerifiedRates(passed(), failed(), tuple(runs))
