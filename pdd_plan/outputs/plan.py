"""The plan: what `optimize` produces, `--out` writes, and `simulate`, `emit`, `report` and
`sweep` consume. One strict, typed object; unknown keys are errors.

`schema_version: 2`. A plan without it is the first format (v1: infeasible architectures as
plain strings, solver wall-clock seconds inside) and is upgraded on load.
"""

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from pydantic import Field, NonNegativeFloat, NonNegativeInt, model_serializer, model_validator

from pdd_plan import architectures
from pdd_plan.common import limits
from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema.io import parse, read_yaml
from pdd_plan.inputs.schema.scenario import SLA, Scenario
from pdd_plan.outputs.base import Out as _Out
from pdd_plan.outputs.day_plan import DayPlan
from pdd_plan.outputs.plan_uncertainty import PlanUncertainty

SCHEMA_VERSION: Literal[2] = 2
# a plan is a fleet somebody could buy: bounds that catch hand edits (1e9 instances) before
# any command allocates per instance; the total per architecture is limits "PLAN_INSTANCES"
# (simulate keeps state and emit writes files per instance: 2 x 100,000 took 80 s each)
MAX_INSTANCES_PER_GROUP = 100_000
MAX_GPUS_PER_INSTANCE = 4_096
MAX_REDUNDANT_EXPERTS = 4_096  # physical expert slots beyond the logical ones, per MoE layer
MAX_COST_PER_HOUR = 1e15  # $/hour; finite and far above any fleet
PLAN_FIX = "write plans with `pdd-plan optimize --out PLAN.yaml`"


Cost = Field(ge=0, le=MAX_COST_PER_HOUR)


class InstanceGroup(_Out):
    """`count` identical instances of one role, GPU type and size in one datacenter."""

    role: Literal["prefill", "relay_decode", "main_decode", "decode"]
    gpu: str
    datacenter: str
    count: int = Field(ge=0, le=MAX_INSTANCES_PER_GROUP)
    gpus_per_instance: int = Field(ge=1, le=MAX_GPUS_PER_INSTANCE)
    tp: int = Field(ge=1, le=MAX_GPUS_PER_INSTANCE)
    dp: int = Field(ge=1, le=MAX_GPUS_PER_INSTANCE)
    ep: int = Field(ge=1, le=MAX_GPUS_PER_INSTANCE)
    # extra routed-expert slots (SGLang --ep-num-redundant-experts, with EPLB); absent: none
    redundant_experts: int | None = Field(default=None, ge=1, le=MAX_REDUNDANT_EXPERTS)
    cost_per_hour: float = Cost

    _omit_if_none = ("redundant_experts",)


class LineChoice(_Out):
    sku: str
    gbps: float = Field(gt=0)
    count: int = Field(ge=1, le=MAX_INSTANCES_PER_GROUP)
    cost_per_hour: float = Cost
    utilization: NonNegativeFloat
    rtt_ms: NonNegativeFloat


class TTFT(_Out):
    p50: NonNegativeFloat
    p90: NonNegativeFloat
    p99: NonNegativeFloat


class TPOT(_Out):
    p50: NonNegativeFloat
    p90: NonNegativeFloat


class RouteShare(_Out):
    p_md: float = Field(ge=0, le=1.0001)
    p_rld_md: float = Field(ge=0, le=1.0001)
    p_rld: float = Field(ge=0, le=1.0001)


class Routing(_Out):
    _omit_if_none = ("handoff_payload", "handoff_payload_why")
    # relay requests whose prefill-side hit rate is at or below this; None: nothing relays
    relay_at_or_below_hit_rate: float | None = Field(default=None, ge=0, le=1)
    singular_max_output_tokens: NonNegativeInt | None = None
    # what relay decode hands main decode (recompute: token IDs, MD extends; kv: their KV over
    # the line) and why; None where nothing relays
    handoff_payload: Literal["recompute", "kv"] | None = None
    handoff_payload_why: str | None = Field(default=None, max_length=400)


class TransferSeconds(_Out):
    """A plan's KV transfer time: the mean, and its percentiles where requests move KV to main
    decode (plans written before they were reported have the mean alone)."""

    _omit_if_none = ("p50", "p90", "p99")
    p50: NonNegativeFloat | None = None
    p90: NonNegativeFloat | None = None
    p99: NonNegativeFloat | None = None
    mean: NonNegativeFloat


class Solver(_Out):
    _omit_if_none = ("seconds", "dinkelbach_iterations")
    status: str
    seconds: NonNegativeFloat | None = None  # only with `optimize --timings` (v1: always)
    milps: NonNegativeInt
    optimality_gap: float
    dinkelbach_iterations: NonNegativeInt | None = None


class Quantiles(_Out):
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None


class Check(_Out):
    simulated: float | None
    target: float
    ok: bool


class Caps(_Out):
    prefill: float
    line: float
    decode: float
    line_delay: float


class Round(_Out):
    """One verification round: the caps it solved under and what the replay said."""

    round: NonNegativeInt
    caps: Caps
    sla_met: bool | None = None
    bottleneck: Literal["prefill", "line", "decode"] | None = None
    infeasible: str | None = None  # the re-solve under tighter caps found no plan

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: Any) -> dict[str, Any]:
        d: dict[str, Any] = handler(self)
        if self.infeasible is None:
            d.pop("infeasible", None)
        else:
            d.pop("sla_met", None)
            d.pop("bottleneck", None)
        return d


class Warmup(_Out):
    """The replay's first requests left out of its figures (``sim.warmup``): one-sided MSER-5
    over TTFT and TPOT; ``method`` "none" where nothing was searched (an unstable line: the
    stated window from empty). ``settled`` False: no steady state found, nothing dropped."""

    _omit_if_none = ("note",)
    method: Literal["MSER-5", "none"]
    requests: NonNegativeInt
    kept_requests: NonNegativeInt
    settled: bool
    note: str | None = None


class EarlyStop(_Out):
    """Where a verification replay stopped because every SLA verdict was settled
    (``sim.sequential``): it replayed the first ``replayed`` of ``full_length`` requests and
    its figures are over the leading ``Simulated.requests`` of them, whose figures are the
    full replay's; each verdict holds at ``confidence`` (all checks and looks together)."""

    replayed: NonNegativeInt
    full_length: NonNegativeInt
    confidence: float = Field(gt=0, lt=1)


class Simulated(_Out):
    """The plan replayed request by request (optimize's verification). Its figures are over
    the requests past ``warmup`` (absent in plans written before it was reported: the whole
    replay). ``requests``: the replay length the figures are over; ``early_stop``: present
    when the replay stopped before its full length."""

    _omit_if_none = (
        "warmup",
        "early_stop",
        "ttft_s_ci",
        "tpot_ms_ci",
        "unsettled",
        "tails",
        "note",
    )
    ttft_s: Quantiles
    tpot_ms: Quantiles
    # each percentile's 95% batch-means interval [lo, hi] (sim.sequential.quantile_interval;
    # None: too few batches), and the percentiles whose interval reaches past +-5% of them
    # (absent in plans written before they were reported)
    ttft_s_ci: dict[str, list[float] | None] | None = None
    tpot_ms_ci: dict[str, list[float] | None] | None = None
    unsettled: list[str] | None = None
    # where the TTFT figures are a long replay of the prefill stage composed with the rest of
    # each replayed request's first token (sim.tails): its method and lengths
    tails: dict[str, str | int] | None = None
    kv_transfer_s: Quantiles
    line_utilization: float | None
    route_share: RouteShare
    rld_token_share: float
    goodput_rps: float | None
    requests: NonNegativeInt
    warmup: Warmup | None = None
    early_stop: EarlyStop | None = None
    sla_met: bool
    checks: dict[str, Check]
    rounds: list[Round]
    # where the plan runs another architecture's verified fleet, why (optimize/contains.py)
    note: str | None = Field(default=None, max_length=600)


class ArchitecturePlan(_Out):
    """One architecture's fleet, line and predicted service."""

    _omit_if_none = ("simulated", "cost_owned_per_hour", "cost_new_per_hour")
    instances: list[InstanceGroup]  # each group's cost_per_hour at market price
    line: LineChoice | None
    cost_per_hour: float = Cost  # as counted: owned capacity at its owned price
    # with an `owned:` section only: what the owned capacity the plan uses counts at, and the
    # new spend on top (they sum to cost_per_hour)
    cost_owned_per_hour: float | None = Field(default=None, ge=0, le=MAX_COST_PER_HOUR)
    cost_new_per_hour: float | None = Field(default=None, ge=0, le=MAX_COST_PER_HOUR)
    goodput_rps: NonNegativeFloat
    bcr: NonNegativeFloat
    ttft_s: TTFT
    tpot_ms: TPOT
    route_share: RouteShare
    rld_token_share: float = Field(ge=0, le=1.0001)
    routing: Routing
    prefill_utilization: NonNegativeFloat
    kv_transfer_s: TransferSeconds
    binding_constraints: list[str]
    shadow_prices: dict[str, float]
    solver: Solver
    simulated: Simulated | None = None

    @model_validator(mode="after")
    def _fleet_size(self) -> "ArchitecturePlan":
        total = sum(g.count for g in self.instances)
        if total > limits.value("PLAN_INSTANCES"):
            raise ValueError(f"instances sum to {limits.exceeded('PLAN_INSTANCES', total)}")
        if self.line is not None and self.line.count > limits.value("LINES"):
            raise ValueError(f"line.count: {limits.exceeded('LINES', self.line.count)}")
        return self

    def groups(self, role: str) -> list[InstanceGroup]:
        return [g for g in self.instances if g.role == role and g.count > 0]

    @property
    def prefill_datacenter(self) -> str | None:
        return next((g.datacenter for g in self.groups("prefill")), None)


ReasonKind = Literal[
    "ttft_floor",  # prefill alone breaks a TTFT target: no hardware here helps
    "ttft_out_of_reach",  # no routing keeps enough requests under a TTFT target
    "tpot",  # the fastest decode step is over the TPOT target
    "line_capacity",  # no line option carries the KV bytes
    "gpu_availability",  # the pools do not fit in the GPUs the datacenters list
    "sla",  # the SLA cannot be met for a reason not named above
    "replay_sla",  # the plan's simulator replay still misses the SLA after verification
]
REASON_ORDER: dict[str, int] = {
    "ttft_floor": 0,
    "ttft_out_of_reach": 0,
    "tpot": 1,
    "line_capacity": 2,
    "gpu_availability": 3,
    "sla": 4,
    "replay_sla": 5,
}


class Reason(_Out):
    """Why an architecture has no plan: a kind, the sentence a user reads (which field to
    relax and by how much), and that field when there is one."""

    _omit_if_none = ("field",)
    kind: ReasonKind
    message: str
    field: str | None = None


def classify(message: str) -> ReasonKind:
    """The kind of a v1 (plain-string) reason, from the sentence v1 plans wrote."""
    m = message
    for prefix, kind in (
        ("TTFT P", "ttft_out_of_reach" if "out of reach" in m else "ttft_floor"),
        ("TPOT", "tpot"),
        ("line capacity", "line_capacity"),
        ("GPU availability", "gpu_availability"),
    ):
        if m.startswith(prefix):
            return kind  # type: ignore[return-value]
    return "sla"


class Infeasible(_Out):
    """An architecture that has no plan: reasons, the binding one first."""

    reasons: list[Reason] = Field(min_length=1)

    @property
    def message(self) -> str:
        return self.reasons[0].message

    @classmethod
    def from_message(cls, message: str) -> "Infeasible":
        """From a v1 plan's string ("pdd: no plan meets the scenario: <reason>")."""
        bare = message.split(": no plan meets the scenario: ", 1)[-1]
        return cls(reasons=[Reason(kind=classify(bare), message=bare)])


class Comparison(_Out):
    bcr_gain_vs_idc_pd: float | None = None
    bcr_gain_vs_cdc_pd: float | None = None
    p90_ttft_reduction_vs_cdc_pd: float | None = None
    p90_ttft_same_fleet_all_p_md_s: float | None = None


class Plan(_Out):
    """What `optimize` returns: a plan per feasible architecture, the reasons of the others,
    the comparison, and the validated scenario (`inputs`) so the file stands alone."""

    schema_version: Literal[2] = SCHEMA_VERSION
    scenario: str
    model: str
    rate_rps: float | None
    objective: Literal["bcr", "cost", "goodput"]
    sla: SLA
    classes: int = Field(ge=1)
    inputs: Scenario
    plans: dict[str, ArchitecturePlan]
    infeasible: dict[str, Infeasible] = {}
    comparison: Comparison
    day: DayPlan | None = None  # a day of periods (workload.periods): its fleet and schedule
    # every plan under draws of the uncertain inputs (absent: not computed)
    uncertainty: PlanUncertainty | None = None

    _omit_if_none: ClassVar[tuple[str, ...]] = ("day", "uncertainty")

    @model_validator(mode="before")
    @classmethod
    def _upgrade(cls, data: Any) -> Any:
        """v1 (no schema_version): reasons were strings; solver seconds always present."""
        if not isinstance(data, dict):
            return data
        v = data.get("schema_version", 1)
        if v == SCHEMA_VERSION:
            return data
        if v != 1:
            raise ValueError(
                f"schema_version {v!r} is not one this pdd-plan reads (1 or {SCHEMA_VERSION})"
            )
        out = {"schema_version": SCHEMA_VERSION, **{k: x for k, x in data.items()}}
        inf = out.get("infeasible") or {}
        if isinstance(inf, dict):
            out["infeasible"] = {
                a: Infeasible.from_message(w) if isinstance(w, str) else w for a, w in inf.items()
            }
        return out

    @model_validator(mode="after")
    def _known(self) -> "Plan":
        for a in list(self.plans) + list(self.infeasible):
            if a not in architectures.REGISTRY:
                raise ValueError(f"unknown architecture '{a}' in the plan")
        dcs = {d.name for d in self.inputs.datacenters}
        for a, p in self.plans.items():
            for i, g in enumerate(p.instances):
                if g.datacenter not in dcs:
                    raise ValueError(
                        f"plans.{a}.instances[{i}]: datacenter '{g.datacenter}' is not one of "
                        f"the scenario's ({', '.join(sorted(dcs))})"
                    )
        return self

    def arch(
        self, name: str, file: str | None = None, field: str = "--architecture"
    ) -> ArchitecturePlan:
        """One architecture's plan, or a one-line error saying which ones the plan has."""
        if name not in self.plans:
            have = ", ".join(self.plans) or "none"
            why = self.infeasible.get(name)
            raise InputError(
                file,
                field,
                f"the plan has no '{name}' architecture"
                + (f" (infeasible: {why.message})" if why else f" (it has: {have})"),
                f"use one of {have}",
            )
        return self.plans[name]

    def dump(self) -> dict[str, Any]:
        """A plain, JSON-ready dict (the file format)."""
        return self.model_dump(mode="json")

    def to_text(self, fmt: str) -> str:
        d = self.dump()
        if fmt == "json":
            return json.dumps(d, indent=2, sort_keys=False) + "\n"
        return str(yaml.safe_dump(d, sort_keys=False))


def parse_plan(data: Any, file: str | None = None) -> Plan:
    """A plan from parsed YAML/JSON; one-line InputError naming the field otherwise."""

    where = file or "plan"
    if not isinstance(data, dict) or "plans" not in data or "inputs" not in data:
        raise InputError(
            file, None, "not a plan file (no 'plans' and 'inputs' at the top)", PLAN_FIX
        )
    if not isinstance(data["plans"], dict) or not data["plans"]:
        raise InputError(file, "plans", "no plans in the plan file", PLAN_FIX)
    return parse(Plan, data, where, PLAN_FIX)


def load_plan(path: str | Path) -> Plan:

    return parse_plan(read_yaml(path), str(path))
