"""A replay's verdict against the SLA: the one typed, immutable result that `sim.run.verify`
returns and that every reader of a replay's pass/fail takes (the optimizer's verification,
evaluate's rate search, the uncertainty block's verified draws, the day's periods).

The words, one act each: a *replay* runs requests through the simulator (`sim.replay`); its
*verdict* is this judgment against the SLA (`sim.run.verify`); to *verify* a plan or fleet is to
replay it and take that verdict, one act wherever it runs: the optimizer's loop that re-solves
with a tighter cap while a plan's verdict fails (`optimize/verify.py`), evaluate's search over
rates for where a fleet's verdict turns (`evaluate/verify.py`), and the uncertainty block's
`--verify-draws`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# the checks, in the order they are printed: the SLA field each compares against
CHECKS = ("ttft_p90", "ttft_p99", "tpot_p90")


@dataclass(frozen=True)
class Check:
    """One SLA check: the simulated percentile (None: no request to take it over), the
    target, and whether it is met."""

    simulated: float | None
    target: float
    ok: bool

    @classmethod
    def of(cls, simulated: float | None, target: float) -> Check:
        return cls(simulated, target, bool(simulated is not None and simulated <= target))


@dataclass(frozen=True)
class EarlyStop:
    """Where a replay stopped, its verdicts settled (`sim.sequential`)."""

    replayed: int
    full_length: int
    confidence: float


@dataclass(frozen=True)
class Verdict:
    """Whether a replay meets the SLA, and why not.

    `figures` is the replay's :meth:`SimResult.summary` (its percentiles, shares and warm-up);
    `bottleneck` is None when the SLA is met, else the cap to tighten (``prefill``, ``line``
    or ``decode``); `tail_breakdown_s` is where the TTFT tail's time goes (mean prefill wait,
    prefill, KV transfer and decode wait of the requests at or above the TTFT P90). A rate
    past the stability limit is not replayed (:meth:`unreplayed`): no figures, no checks."""

    sla_met: bool
    bottleneck: str | None
    checks: dict[str, Check] = field(default_factory=dict)
    tail_breakdown_s: dict[str, float | None] = field(default_factory=dict)
    figures: dict[str, Any] | None = None
    early_stop: EarlyStop | None = None

    @classmethod
    def unreplayed(cls, bottleneck: str) -> Verdict:
        """A rate that fails unreplayed: `bottleneck` saturates there."""
        return cls(False, bottleneck)

    @property
    def replayed(self) -> bool:
        return self.figures is not None

    @property
    def failed_checks(self) -> list[str]:
        return [k for k, c in self.checks.items() if not c.ok]

    def simulated(self, check: str) -> float | None:
        """A check's simulated figure (None: not replayed, or no request to take it over)."""
        c = self.checks.get(check)
        return c.simulated if c is not None else None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: the replay's figures with the checks, verdict and breakdown beside
        them (and ``early_stop`` where the replay stopped early)."""
        out = dict(self.figures or {})
        out.update(
            {
                "checks": {k: asdict(c) for k, c in self.checks.items()},
                "sla_met": self.sla_met,
                "tail_breakdown_s": dict(self.tail_breakdown_s),
                "bottleneck": self.bottleneck,
            }
        )
        if self.early_stop is not None:
            out["early_stop"] = asdict(self.early_stop)
        return out
