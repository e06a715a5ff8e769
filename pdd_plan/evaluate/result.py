"""What `evaluate` returns: typed and immutable, each architecture's SLA goodput on its fleet
with the figures at that rate; `as_dict()` is its JSON form (what the CLI prints)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class GivesOut:
    """What gives out first one step above the goodput, at what rate, and who said so
    (``simulator``: the verifying replay's bottleneck; else ``analytic``)."""

    resource: str
    at_rps: float
    by: str


@dataclass(frozen=True)
class ArchitectureEvaluation:
    """One architecture's SLA goodput (req/s) on its fleet, its cost and BCR (requests per
    dollar), and the figures at that rate: simulated when verified, else analytic."""

    title: str
    goodput_rps: float
    cost_per_hour: float
    cost_owned_per_hour: float | None  # with an `owned:` section: the owned part
    bcr: float | None  # requests per dollar: goodput x 3600 / cost
    ttft_s: dict[str, float | None]
    tpot_ms: dict[str, float | None]
    route_share: dict[str, float]
    rld_token_share: float
    gives_out_first: GivesOut
    fleet: dict[str, Any]  # the fleet as evaluated (from, speed_factor, instances, line, unused)
    analytic: dict[str, Any]  # the analytic search's goodput and figures
    simulated: dict[str, Any] | None  # the simulator's verification; None without it

    def as_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__}
        if self.cost_owned_per_hour is None:
            del out["cost_owned_per_hour"]
        out["gives_out_first"] = asdict(self.gives_out_first)
        return out


@dataclass(frozen=True)
class Evaluation:
    """Every architecture's evaluation (`architectures`) and, for those whose fleet meets the
    SLA at no rate, the reasons (`infeasible`: {"reasons": [...]})."""

    scenario: str
    model: str
    sla: dict[str, Any]
    step: float
    sim_requests: int | None  # None: analytic only
    seed: int
    architectures: dict[str, ArchitectureEvaluation] = field(default_factory=dict)
    infeasible: dict[str, dict[str, Any]] = field(default_factory=dict)
    note: str | None = None  # what the CLI says about the fleet it read (e.g. a day's plan)

    def with_note(self, note: str | None) -> Evaluation:
        return replace(self, note=note)

    def as_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__}
        out["architectures"] = {a: e.as_dict() for a, e in self.architectures.items()}
        if self.note is None:
            del out["note"]
        return out
