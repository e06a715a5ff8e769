"""Scenario: what the user asks the planner (workload, fleet, line, SLA, prices, policy)."""

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from pdd_plan import architectures
from pdd_plan.common import limits
from pdd_plan.inputs.schema import day
from pdd_plan.inputs.schema.common import (
    MAX_BUDGET_PER_HOUR,
    MAX_LINE_GBPS,
    MAX_LINE_USD_PER_MONTH,
    MAX_USD_PER_GPU_HOUR,
    Name,
    Strict,
)
from pdd_plan.inputs.schema.distribution import Distribution, hit_range, token_range
from pdd_plan.inputs.schema.engine import EngineLimits
from pdd_plan.inputs.schema.fleet import MAX_GPUS_PER_INSTANCE, Fleet
from pdd_plan.inputs.schema.line import (
    DEFAULT_CONNECTIONS,
    DEFAULT_STREAMS_PER_TRANSFER,
    LineSKU,
    check_streams,
)
from pdd_plan.inputs.schema.names import check_datacenter_names, check_line_names, check_priced_gpus
from pdd_plan.inputs.schema.owned import Owned, check_against
from pdd_plan.inputs.schema.routing import HitThreshold
from pdd_plan.inputs.schema.uncertainty import Uncertainty

ARCHITECTURES: tuple[str, ...] = architectures.names()  # the built-in ones (the spec has all)


MAX_TOKENS = limits.LIMITS["TOKENS"].default  # the default; limits.value("TOKENS") is in force


def _under(name: str, got: float) -> None:
    """ValueError (the schema's one-line error) when `got` is over limit `name`."""
    if not got <= limits.value(name):
        raise ValueError(limits.exceeded(name, got))


class Workload(Strict):
    rate_rps: float | None = Field(default=None, gt=0, le=1e6)
    """Requests per second to plan for. Omit it and each architecture gets its highest SLA
    goodput per dollar (or most goodput within `budget_per_hour`)."""
    input_tokens: Distribution | None = None
    """Prompt length per request (a distribution); not needed with a trace."""
    output_tokens: Distribution | None = None
    """Generated tokens per request (a distribution); not needed with a trace."""
    prefix_hit: Distribution = Distribution(fixed=0.0)
    """Per-request prefix-cache hit rate on the prefill side, a fraction in [0, 1]."""
    trace: str | None = None
    """A request trace file (Mooncake JSONL, Azure CSV or generic JSONL/CSV) to plan for; it
    replaces the distributions above."""
    arrival_cv: float = Field(default=1.0, gt=0, le=10)
    """Coefficient of variation of the gaps between synthetic arrivals (gamma-distributed, mean
    1/rate_rps): 1 is Poisson, above 1 bursty. The simulator draws such arrivals and the
    prefill-queue law sizes for them; a trace keeps its own timestamps."""
    classes: PositiveInt = 24
    """Request classes the optimizer routes (8 hit bins x length buckets, split at
    `policy.singular_max_output_tokens` where relay decode may finish requests). Each class
    gets one routing decision; prefill times and TTFT misses are averaged over at least 192
    strata whatever the count, so costs do not move with it. 24 suits most workloads, 48 when
    routing should split long from short requests of one hit bin."""
    samples: PositiveInt = 20000
    """Requests drawn from the distributions to build the classes."""
    periods: list[day.Period] | None = Field(default=None, exclude_if=lambda v: v is None)
    """A day of traffic: periods with their own rate (and optionally request mix) covering the
    24 hours; `optimize` then plans one fleet for the day (base plus elastic per period)."""
    periods_from_trace: day.PeriodsFromTrace | None = Field(
        default=None, exclude_if=lambda v: v is None
    )
    """A day cut from the trace: periods of `period_minutes`, each with the trace's rate and
    request mix in it."""

    @field_validator("input_tokens", "output_tokens")
    @classmethod
    def _token_range(cls, v: Distribution | None) -> Distribution | None:
        return token_range(v)

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
        return hit_range(v)

    @model_validator(mode="after")
    def _lengths(self) -> "Workload":
        if self.trace is None and (self.input_tokens is None or self.output_tokens is None):
            raise ValueError("give input_tokens and output_tokens, or a trace")
        if self.trace is not None and self.arrival_cv != 1.0:
            raise ValueError("arrival_cv shapes synthetic arrivals; a trace keeps its own")
        if self.periods is not None and self.periods_from_trace is not None:
            raise ValueError("give workload.periods or workload.periods_from_trace, not both")
        if self.periods_from_trace is not None and self.trace is None:
            raise ValueError("workload.periods_from_trace needs workload.trace")
        if self.periods is not None:
            day.check_periods(self.periods, self.rate_rps is not None)
        return self


class Datacenter(Strict):
    name: Name
    """The datacenter's name, used by `placement`, `owned` and fleets."""
    gpus: dict[str, int]
    """GPUs available there per GPU profile name (owned ones included)."""

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
    """Line capacity in Gb/s."""
    cost_per_month: float = Field(gt=0, le=MAX_LINE_USD_PER_MONTH)
    """Lease price in $/month."""
    rtt_ms: float = Field(default=10.0, ge=0)
    """Round-trip time in ms."""
    name: Name | None = None
    """The line's name (default: `custom-<index>-<gbps>g`)."""
    tcp_efficiency: float = Field(default=0.9, gt=0, le=1)
    """Goodput / line rate after Ethernet, IP and TCP overheads and retransmits."""
    connections: PositiveInt = DEFAULT_CONNECTIONS
    """TCP connections in the transfer engine's pool between the datacenters."""
    streams_per_transfer: PositiveInt = DEFAULT_STREAMS_PER_TRANSFER
    """Connections one KV transfer is striped over (Mooncake's lanes per peer)."""
    per_connection_gbps: PositiveFloat | None = None
    """One connection's measured goodput (from `line calibrate`); default: from window / RTT and
    loss."""
    base: Name | None = None
    """A bundled line profile whose other fields (loss, slow start, other tenants' load, the
    sender's copy) this line keeps; the fields given here replace the base's."""

    @model_validator(mode="after")
    def _streams_fit_pool(self) -> "CustomLine":
        check_streams(self.streams_per_transfer, self.connections)
        return self


class Link(Strict):
    candidates: list[str | CustomLine] = Field(min_length=1)
    """Lines the optimizer may lease: bundled SKU names (`pdd-plan profiles list`) or inline
    lines."""
    max_lines: PositiveInt = 4
    """Most lines of one SKU the optimizer may lease."""
    rtt_ms: float | None = Field(default=None, ge=0)  # overrides every candidate's RTT
    """Overrides every candidate's RTT (ms)."""
    transfer_gbps: PositiveFloat | None = Field(default=None, le=MAX_LINE_GBPS)
    """Overrides the rate one transfer gets on every candidate (Gb/s of goodput): each one's
    `per_connection_gbps` becomes this over `streams_per_transfer` x `tcp_efficiency`."""

    @field_validator("max_lines")
    @classmethod
    def _max_lines(cls, v: int) -> int:
        _under("LINES", v)  # line options (and MILP size) grow with it
        return v

    @field_validator("candidates")
    @classmethod
    def _candidates(cls, v: list[Any]) -> list[Any]:
        _under("LINE_CANDIDATES", len(v))
        return v


class Placement(Strict):
    prefill: str | None = None
    """Datacenter of prefill (default: the first)."""
    relay_decode: str | None = None
    """Datacenter of relay decode (default: the prefill datacenter)."""
    main_decode: str | None = None
    """Datacenter of main decode (default: the second)."""


class SLA(Strict):
    ttft_p90_s: PositiveFloat
    """Time to first token, 90th percentile, in seconds."""
    ttft_p99_s: PositiveFloat
    """Time to first token, 99th percentile, in seconds (at least the P90)."""
    tpot_ms: PositiveFloat
    """Time per output token in ms (the decode step the batch size must meet)."""
    over: Literal["period", "day"] = Field(default="period", exclude_if=lambda v: v == "period")
    """With `workload.periods`: the TTFT percentiles hold in every period (`period`), or over
    the day's requests pooled (`day`)."""

    @model_validator(mode="after")
    def _order(self) -> "SLA":
        if self.ttft_p99_s < self.ttft_p90_s:
            raise ValueError("ttft_p99_s must be >= ttft_p90_s")
        return self


class Policy(Strict):
    drc: bool = True
    """Main decode's radix cache: only the prefix it lacks crosses the line."""
    handoff: Literal["catch_up", "one_shot"] = "catch_up"
    """How relay decode hands a request to main decode: `catch_up` (keeps decoding while main
    decode recomputes the relayed tokens) or `one_shot` (stops, main decode recomputes, the
    user sees a stall)."""
    singular_max_output_tokens: int | None = Field(default=500, ge=0)
    """Requests with at most this many output tokens may finish on relay decode and never cross
    the line (`p_rld`); null: never."""
    relay_max_tokens: PositiveInt = 256
    """Most tokens relay decode generates before handing off."""
    md_hit_ratio: float = Field(default=1.0, ge=0, le=1)  # MD's hit / prefill-side hit (DRC)
    """Main decode's hit rate / the prefill side's, for distribution workloads (traces simulate
    both caches)."""
    router: Literal["plan", "backlog", "hit_threshold"] = "plan"
    """How requests are relayed. `plan`: the planner relays only as much as its SLA needs at
    the least cost, and the simulator applies that plan. `backlog` (simulator only): relay a
    request when the line's backlog predicts a TTFT miss. `hit_threshold` (optimize, evaluate
    and simulate): the PDD report's rule, relay every request whose prefill-side hit is at or
    below `relay_hit_threshold`, the short (singular) ones finishing near; every other request
    goes P -> MD."""
    relay_hit_threshold: HitThreshold = Field(
        default=HitThreshold(), exclude_if=lambda v: v == HitThreshold()
    )
    """The hit threshold `router: hit_threshold` relays at or below, with its source."""
    handoff_payload: Literal["auto", "recompute", "kv"] = Field(
        default="auto", exclude_if=lambda v: v == "auto"
    )
    """What relay decode hands main decode: `recompute` (the generated tokens' IDs; MD extends
    them in a pass joined to its running decode batch), `kv` (their KV over the line), or
    `auto`: the planner takes the one with the shorter worst case and says why."""


class Search(Strict):
    """Optimizer knobs (documented defaults; rarely changed)."""

    utilization_levels: list[float] = [0.5, 0.65, 0.8, 0.9]
    """Line and prefill utilization caps tried when the rate is free."""
    max_gpus_per_instance: int = Field(default=32, ge=1, le=MAX_GPUS_PER_INSTANCE)
    """Largest instance considered (GPUs)."""
    parallelisms: PositiveInt = 3  # three sizes: see the description
    """Instance sizes tried per GPU type and role, from the smallest that fits the model. Three by
    default: a larger instance halves the weights each GPU reads per step, which is what lets a
    memory-bound MoE decode meet a TPOT target at a useful batch; the search stays capped by
    `max_gpus_per_instance`."""
    prefill_chunk_tokens: PositiveInt = 8192
    """Chunked-prefill size (SGLang `--chunked-prefill-size`)."""
    decode_utilization: float = Field(default=1.0, gt=0, le=1)
    """Share of decode's TPOT-target capacity used; 1: no margin (replay-checked), below 1 a
    kept margin the plan prices and the tornado moves (0.9 .. 1)."""
    prefill_utilization: float = Field(default=0.97, gt=0, le=0.97)
    """Highest utilization of the pooled prefill queue a plan may run at. 0.97 is the laws'
    reach, not a margin: the queue's lattice law is checked to 0.97 (the M/D/1 mean within 0.2%
    of Pollaczek-Khinchine), and the line law's chain over the prefill pool that feeds it grows
    as 1 / (1 - utilization) (about 700 states at 0.97; at 0.999 it does not fit in memory), so
    a plan never runs prefill past it, even where a replay meets the SLA there (the default's
    IDC-PD with 6 prefill instances at 97.5%: the plan prices what the reach costs). Lower is a
    margin, priced by the plan and moved by the tornado (0.9 .. 0.97)."""
    line_utilization: float = Field(default=0.95, gt=0, le=0.95)
    """Highest share of the leased line's usable capacity a plan may fill. 0.95 is the line
    law's reach, not a margin: its transfer waits are computed on a state space that grows as
    1 / (1 - utilization) (its truncation about 400 states past the servers at 0.95, 20,700 at 0.999), so a
    plan never runs the line past it; lower is a margin, priced by the plan and moved by the
    tornado (0.9 .. 0.95). It errs toward more or faster lines on a line-bound plan."""
    max_prefill_extra: PositiveInt = 8
    """Prefill pool sizes tried above the smallest stable one."""
    time_limit_s: PositiveFloat = 30.0
    """Wall-clock seconds for one architecture's whole planning (every MILP, Dinkelbach step and
    verification replay); past it the run stops with an error."""
    robust: float | None = Field(default=None, gt=0, lt=1, exclude_if=lambda v: v is None)
    """Plan robust fleets: per architecture the cheapest fleet found meeting the SLA in at least
    this share of independent draws of the `uncertainty:` inputs (`optimize --robust`)."""

    @field_validator("utilization_levels")
    @classmethod
    def _levels(cls, v: list[float]) -> list[float]:
        if not v or any(not (0 < x < 1) for x in v):
            raise ValueError("utilization_levels must be fractions in (0, 1)")
        _under("SEARCH_STEPS", len(v))
        return sorted(set(v))

    @field_validator("max_prefill_extra", "parallelisms")
    @classmethod
    def _extra(cls, v: int) -> int:
        _under("SEARCH_STEPS", v)
        return v


class Scenario(Strict):
    name: Name
    """The scenario's name, printed with its plans."""
    model: str
    """Bundled model profile name, or a path to a model YAML."""
    workload: Workload
    """The traffic to plan for."""
    datacenters: list[Datacenter] = Field(min_length=1)
    """Datacenters and the GPUs available in each."""
    link: Link | None = None
    """The leased line(s) between prefill's and main decode's datacenters; needed by `pdd` and
    `cdc_pd`."""
    placement: Placement = Placement()
    """Which datacenter each role runs in."""
    sla: SLA
    """Latency targets every plan must meet."""
    prices: dict[str, Annotated[float, Field(gt=0, le=MAX_USD_PER_GPU_HOUR)]] = {}
    """$/GPU-hour per GPU type, overriding the profiles' defaults (with periods: the base
    fleet's price, paid every hour of the day)."""
    on_demand_prices: dict[str, float] = Field(default={}, exclude_if=lambda v: not v)
    """With periods: $/GPU-hour of elastic (on-demand) GPUs per GPU type (default: `prices`)."""
    elastic: day.Elastic | None = Field(default=None, exclude_if=lambda v: v is None)
    """With periods: elastic GPUs per datacenter on top of the base fleet and how they are
    paid; without it the day's fleet is all base."""
    timezone: str = Field(default="UTC", exclude_if=lambda v: v == "UTC")
    """IANA timezone of the periods' hours (and of the emitted scaling schedule)."""
    policy: Policy = Policy()
    """Serving policy: prefix caching, hand-off, singular routing."""
    architectures: list[str] = list(ARCHITECTURES)
    """Architectures to plan and compare: `pdd`, `cdc_pd`, `idc_pd`."""
    objective: Literal["bcr", "cost", "goodput"] = "bcr"
    """`bcr`: min cost at `rate_rps`, or without a rate the best goodput per dollar (Dinkelbach);
    `cost`: min cost (needs a rate); `goodput`: most req/s within `budget_per_hour`."""
    day_scale: Literal["fixed", "free"] = Field(default="fixed", exclude_if=lambda v: v == "fixed")
    """With periods and objective `bcr`: `fixed` plans the cheapest day at the periods' rates;
    `free` plans the day at the scale s of the whole rate profile (every period's rate times s,
    searched on 0.5x..2x, at the busiest period's own best scale, and by bisection) with the
    best day BCR (the day's requests per dollar): 10 day plans per architecture, so allow
    `search.time_limit_s` for them."""
    budget_per_hour: float | None = Field(default=None, gt=0, le=MAX_BUDGET_PER_HOUR)
    """$/hour cap, for `objective: goodput`."""
    search: Search = Search()
    """Optimizer knobs (rarely changed)."""
    engine: EngineLimits | None = Field(default=None, exclude_if=lambda v: v is None)
    """The deployed engine's limits on an instance's running batch (its launch flags: running
    requests, CUDA-graph maximum batch, tokens per iteration); omitted: SGLang's defaults."""
    seed: int = Field(default=0, ge=0)  # numpy's generator takes non-negative seeds
    """Sampling seed: same inputs and seed, same plan byte for byte."""
    fleet: Fleet | None = Field(default=None, exclude_if=lambda v: v is None)
    """An existing fleet for `pdd-plan evaluate`: per architecture (or `all`) its instances, line
    and `speed_factor`."""
    owned: Owned | None = Field(default=None, exclude_if=lambda v: v is None)
    """Capacity already there: `optimize` uses it first, at its own price, and plans the
    increment."""
    uncertainty: Uncertainty | None = Field(default=None, exclude_if=lambda v: v is None)
    """Inputs not known exactly, each with a distribution and a source: every plan is evaluated
    under seeded draws of them. Omitted: the perf model's error band alone."""

    @model_validator(mode="after")
    def _owned_known(self) -> "Scenario":
        """Every name that must name something or stay apart: lines, priced GPUs, owned."""
        cands = self.link.candidates if self.link is not None else []
        skus = [c if isinstance(c, str) else line_name(c, i) for i, c in enumerate(cands)]
        check_line_names([(n, not isinstance(c, str)) for n, c in zip(skus, cands)])
        check_priced_gpus(self.prices, self.on_demand_prices, [d.gpus for d in self.datacenters])
        if self.owned is not None:
            check_against(self.owned, {d.name: d.gpus for d in self.datacenters}, skus)
        return self

    @model_validator(mode="after")
    def _day(self) -> "Scenario":
        day.check_timezone(self.timezone)
        day.check_prices(self.on_demand_prices)
        w = self.workload
        days = w.periods is not None or w.periods_from_trace is not None
        if not days and (self.elastic is not None or self.sla.over == "day"):
            raise ValueError("elastic and sla.over need workload.periods or periods_from_trace")
        if days and self.search.robust is not None:
            raise ValueError(
                "search.robust plans one fleet at one rate; a day (workload.periods) plans a base "
                "and an elastic schedule that would not follow it: drop one of them"
            )
        if self.day_scale == "free":
            day.check_free_scale(days, self.objective, self.budget_per_hour)
        if self.on_demand_prices and not days:
            raise ValueError("on_demand_prices need workload.periods or periods_from_trace")
        dcs = {d.name: d.gpus for d in self.datacenters}
        tables = [self.elastic.max_gpus] if self.elastic is not None else []
        tables += [p.elastic_max_gpus for p in w.periods or [] if p.elastic_max_gpus]
        for t in tables:
            day.check_elastic_gpus(t, dcs)
        return self

    @model_validator(mode="after")
    def _consistent(self) -> "Scenario":
        names = [d.name for d in self.datacenters]
        check_datacenter_names(names)
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
