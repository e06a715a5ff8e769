"""Scenario: what the user asks the planner (workload, fleet, line, SLA, prices, policy)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from pdd_plan import architectures
from pdd_plan.common import limits
from pdd_plan.inputs.schema.common import (
    MAX_BUDGET_PER_HOUR,
    MAX_LINE_GBPS,
    MAX_LINE_USD_PER_MONTH,
    MAX_USD_PER_GPU_HOUR,
    Name,
    Strict,
)
from pdd_plan.inputs.schema.fleet import Fleet
from pdd_plan.inputs.schema.line import (
    DEFAULT_CONNECTIONS,
    DEFAULT_STREAMS_PER_TRANSFER,
    LineSKU,
    check_streams,
)
from pdd_plan.inputs.schema.owned import Owned, check_against

ARCHITECTURES: tuple[str, ...] = architectures.names()  # the built-in ones (the spec has all)


class Lognormal(Strict):
    mu: float
    sigma: float = Field(ge=0)
    min: float = Field(ge=0)
    max: float = Field(gt=0)

    @model_validator(mode="after")
    def _order(self) -> Lognormal:
        if self.min > self.max:
            raise ValueError("lognormal min must not exceed max")
        return self


class Distribution(Strict):
    """Exactly one of fixed / lognormal / histogram ([[lo, hi, share], ...], shares sum to 1)."""

    fixed: float | None = Field(default=None, ge=0)
    lognormal: Lognormal | None = None
    histogram: list[tuple[float, float, float]] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Distribution:
        kinds = [k for k in ("fixed", "lognormal", "histogram") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("give exactly one of fixed, lognormal, histogram")
        if self.histogram is not None:
            _check_bins(self.histogram)
        return self


def _check_bins(bins: list[tuple[float, float, float]]) -> None:
    """Bins of [lo, hi, share]: each well formed, shares summing to 1, and no two overlapping
    (a value in two bins would be drawn with both shares: the histogram would not say what
    the user meant)."""
    if not bins:
        raise ValueError("histogram needs at least one [lo, hi, share] bin")
    for lo, hi, share in bins:
        if not (0 <= lo <= hi) or share < 0:
            raise ValueError(
                f"histogram bin [{lo}, {hi}, {share}] needs 0 <= lo <= hi and share >= 0"
            )
    ordered = sorted(bins)
    for a, b in zip(ordered, ordered[1:]):
        if b[0] < a[1] or (a[0] == a[1] == b[0] == b[1]):  # touching at an edge is fine
            raise ValueError(
                f"histogram bins [{a[0]:g}, {a[1]:g}] and [{b[0]:g}, {b[1]:g}] overlap; "
                "give each value range once"
            )
    total = sum(b[2] for b in bins)
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"histogram shares sum to {total:g}, must sum to 1")


MAX_TOKENS = limits.LIMITS["TOKENS"].default  # the default; limits.value("TOKENS") is in force


def _under(name: str, got: float) -> None:
    """ValueError (the schema's one-line error) when `got` is over limit `name`."""
    if not got <= limits.value(name):
        raise ValueError(limits.exceeded(name, got))


class Workload(Strict):
    rate_rps: float | None = Field(default=None, gt=0, le=1e6)  # None: highest goodput per dollar
    input_tokens: Distribution | None = None
    output_tokens: Distribution | None = None
    prefix_hit: Distribution = Distribution(fixed=0.0)  # per-request prefill-side hit rate, 0..1
    trace: str | None = None  # a trace file; replaces the distributions above
    # burstiness of synthetic arrivals: the coefficient of variation of the gaps between
    # requests (gamma-distributed, mean 1/rate_rps); 1 is Poisson, above 1 bursty, below 1
    # smoother. The simulator draws such arrivals and the planner's prefill-queue law
    # (Allen-Cunneen G/G/c, c_a^2 = cv^2) sizes for them. A trace keeps its own timestamps
    arrival_cv: float = Field(default=1.0, gt=0, le=10)
    # request classes the optimizer routes (hit bin x length bucket; 8 hit bins, so 24 = 3
    # length buckets; when a relaying architecture may finish singular requests on relay
    # decode, x output <= policy.singular_max_output_tokens or not, with half the length
    # buckets, at least 1): each class gets one routing decision and the MILP grows with the count.
    # Prefill times and TTFT misses are averaged over >= 192 strata whatever the count, so costs
    # do not move with it (large.yaml: 12 to 192 classes within 5%); 24 suits most workloads,
    # 48 when routing should split long from short requests of one hit bin more finely
    classes: PositiveInt = 24
    samples: PositiveInt = 20000  # requests drawn to build classes from distributions

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _token_range(cls, v: Distribution | None) -> Distribution | None:
        if v is None:
            return v
        lo = hi = v.fixed
        if v.histogram is not None:
            lo = min(b[0] for b in v.histogram if b[2] > 0)
            hi = max(b[1] for b in v.histogram)
        if v.lognormal is not None:
            lo, hi = v.lognormal.min, v.lognormal.max
        # a request has at least one token, and a fixed count is a whole number (the sampler
        # would otherwise silently round 0 up to 1 and 100.5 to 100)
        if lo < 1:
            raise ValueError(f"token counts must be >= 1 (got {lo:g})")
        if v.fixed is not None and v.fixed != int(v.fixed):
            raise ValueError(f"a fixed token count is a whole number (got {v.fixed:g})")
        _under("TOKENS", hi)
        return v

    @field_validator("samples")
    @classmethod
    def _samples(cls, v: int) -> int:
        _under("REQUESTS", v)
        return v

    @field_validator("classes")
    @classmethod
    def _classes(cls, v: int) -> int:
        _under("CLASSES", v)
        return v

    @field_validator("prefix_hit")
    @classmethod
    def _rate_range(cls, v: Distribution) -> Distribution:
        hi = v.fixed if v.fixed is not None else None
        if v.histogram is not None:
            hi = max(b[1] for b in v.histogram)
        if v.lognormal is not None:
            hi = v.lognormal.max
        if hi is not None and hi > 1.0:
            raise ValueError("prefix hit rates are fractions in [0, 1]")
        return v

    @model_validator(mode="after")
    def _lengths(self) -> Workload:
        if self.trace is None and (self.input_tokens is None or self.output_tokens is None):
            raise ValueError("give input_tokens and output_tokens, or a trace")
        if self.trace is not None and self.arrival_cv != 1.0:
            raise ValueError("arrival_cv shapes synthetic arrivals; a trace keeps its own")
        return self


class Datacenter(Strict):
    name: Name
    gpus: dict[str, int]  # GPU profile name -> GPUs available

    @field_validator("gpus")
    @classmethod
    def _counts(cls, v: dict[str, int]) -> dict[str, int]:
        for k, n in v.items():
            if n < 0:
                raise ValueError(f"gpus.{k} must be >= 0")
            _under("GPUS", n)
        return v


class CustomLine(Strict):
    gbps: float = Field(gt=0, le=MAX_LINE_GBPS)
    cost_per_month: float = Field(gt=0, le=MAX_LINE_USD_PER_MONTH)
    rtt_ms: float = Field(default=10.0, ge=0)
    name: Name | None = None
    tcp_efficiency: float = Field(default=0.9, gt=0, le=1)
    connections: PositiveInt = DEFAULT_CONNECTIONS
    streams_per_transfer: PositiveInt = DEFAULT_STREAMS_PER_TRANSFER
    per_connection_gbps: PositiveFloat | None = None

    @model_validator(mode="after")
    def _streams_fit_pool(self) -> CustomLine:
        check_streams(self.streams_per_transfer, self.connections)
        return self


class Link(Strict):
    candidates: list[str | CustomLine] = Field(min_length=1)  # SKU names or inline lines
    max_lines: PositiveInt = 4
    rtt_ms: float | None = Field(default=None, ge=0)  # overrides every candidate's RTT

    @field_validator("max_lines")
    @classmethod
    def _max_lines(cls, v: int) -> int:
        _under("LINES", v)  # line options (and MILP size) grow with it
        return v

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, v: list) -> list:
        _under("LINE_CANDIDATES", len(v))
        return v


class Placement(Strict):
    prefill: str | None = None  # datacenter names; default: first datacenter
    relay_decode: str | None = None  # default: the prefill datacenter
    main_decode: str | None = None  # default: second datacenter


class SLA(Strict):
    ttft_p90_s: PositiveFloat
    ttft_p99_s: PositiveFloat
    tpot_ms: PositiveFloat

    @model_validator(mode="after")
    def _order(self) -> SLA:
        if self.ttft_p99_s < self.ttft_p90_s:
            raise ValueError("ttft_p99_s must be >= ttft_p90_s")
        return self


class Policy(Strict):
    drc: bool = True  # decode-side radix cache on MD: only the missing suffix crosses the line
    handoff: Literal["catch_up", "one_shot"] = "catch_up"
    singular_max_output_tokens: int | None = Field(default=500, ge=0)  # p_rld allowed below this
    relay_max_tokens: PositiveInt = 256  # cap on tokens RLD generates before handing off
    md_hit_ratio: float = Field(default=1.0, ge=0, le=1)  # MD's hit / prefill-side hit (DRC)
    # how the simulator relays: "plan" applies the plan's routing (relay at or below its hit
    # threshold), so the replay verifies the plan that was made; "backlog" relays a request
    # when the line's current backlog predicts a TTFT miss (a load-aware router)
    router: Literal["plan", "backlog"] = "plan"


class Search(Strict):
    """Optimizer knobs (documented defaults; rarely changed)."""

    utilization_levels: list[float] = [0.5, 0.65, 0.8, 0.9]
    max_gpus_per_instance: PositiveInt = 32
    parallelisms: PositiveInt = (
        2  # instance sizes per GPU type and role, from the smallest that fits
    )
    prefill_chunk_tokens: PositiveInt = 8192  # SGLang --chunked-prefill-size
    decode_utilization: float = Field(default=0.9, gt=0, lt=1)  # cap on decode batch slots
    max_prefill_extra: PositiveInt = 8  # prefill pool sizes tried above the smallest stable one
    time_limit_s: PositiveFloat = 30.0

    @field_validator("utilization_levels")
    @classmethod
    def _levels(cls, v: list[float]) -> list[float]:
        if not v or any(not (0 < x < 1) for x in v):
            raise ValueError("utilization_levels must be fractions in (0, 1)")
        _under("SEARCH_STEPS", len(v))
        return sorted(set(v))

    @field_validator("max_prefill_extra")
    @classmethod
    def _extra(cls, v: int) -> int:
        _under("SEARCH_STEPS", v)
        return v


class Scenario(Strict):
    name: Name
    model: str  # profile name or path to a model YAML
    workload: Workload
    datacenters: list[Datacenter] = Field(min_length=1)
    link: Link | None = None
    placement: Placement = Placement()
    sla: SLA
    prices: dict[str, Annotated[float, Field(gt=0, le=MAX_USD_PER_GPU_HOUR)]] = {}
    policy: Policy = Policy()
    architectures: list[str] = list(ARCHITECTURES)
    objective: Literal["bcr", "cost", "goodput"] = "bcr"
    budget_per_hour: float | None = Field(default=None, gt=0, le=MAX_BUDGET_PER_HOUR)
    search: Search = Search()
    seed: int = Field(default=0, ge=0)  # numpy's generator takes non-negative seeds
    # an existing fleet for `pdd-plan evaluate`; left out of dumps when absent (plans stay as they were)
    fleet: Fleet | None = Field(default=None, exclude_if=lambda v: v is None)
    # capacity already there: optimize plans the increment; left out of dumps when absent
    owned: Owned | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _owned_known(self) -> Scenario:
        if self.owned is not None:
            cands = self.link.candidates if self.link is not None else []
            skus = [c if isinstance(c, str) else line_name(c, i) for i, c in enumerate(cands)]
            check_against(self.owned, {d.name: d.gpus for d in self.datacenters}, skus)
        return self

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        names = [d.name for d in self.datacenters]
        if len(set(names)) != len(names):
            raise ValueError("datacenter names must be unique")
        for role in ("prefill", "relay_decode", "main_decode"):
            dc = getattr(self.placement, role)
            if dc is not None and dc not in names:
                raise ValueError(f"placement.{role} names unknown datacenter '{dc}' (have {names})")
        known = architectures.names()
        for a in self.architectures:
            if a not in known:
                raise ValueError(f"unknown architecture '{a}' (use one of {', '.join(known)})")
        if len(set(self.architectures)) != len(self.architectures):
            raise ValueError("architectures are listed more than once")
        crossing = [a for a in self.architectures if architectures.get(a).crosses_line]
        who = " and ".join(crossing)
        if crossing and len(self.datacenters) < 2 and self.placement.main_decode is None:
            raise ValueError(f"{who} need a second datacenter for main decode")
        if crossing and self.link is None:
            raise ValueError(f"{who} need a link between the datacenters")
        if self.objective == "goodput" and self.budget_per_hour is None:
            raise ValueError("objective 'goodput' needs budget_per_hour ($/hour)")
        if self.objective == "cost" and self.workload.rate_rps is None and not self.workload.trace:
            raise ValueError("objective 'cost' needs workload.rate_rps (or a trace)")
        if not self.architectures:
            raise ValueError(f"architectures must list at least one of {', '.join(known)}")
        return self


def line_name(c: CustomLine, idx: int) -> str:
    return c.name or f"custom-{idx}-{c.gbps:g}g"


def line_from_custom(c: CustomLine, idx: int) -> LineSKU:
    return LineSKU(
        name=line_name(c, idx),
        gbps=c.gbps,
        cost_per_month=c.cost_per_month,
        rtt_ms=c.rtt_ms,
        tcp_efficiency=c.tcp_efficiency,
        connections=c.connections,
        streams_per_transfer=c.streams_per_transfer,
        per_connection_gbps=c.per_connection_gbps,
        source="scenario link.candidates",
    )
