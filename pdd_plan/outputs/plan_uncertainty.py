"""The plan's optional `uncertainty` block: every plan evaluated under draws of the uncertain
inputs (pdd_plan/uncertainty/), the verdict's probability, what would flip it, N-1.

Optional and additive: a plan without it (every earlier file) reads as before, and the block
stays absent unless the planner computed it.
"""

from pydantic import Field

from pdd_plan.inputs.schema.common import Strict


class Band(Strict):
    """P10 / P50 / P90 over the draws (None: undefined, e.g. a gain over a zero BCR)."""

    p10: float | None = None
    p50: float | None = None
    p90: float | None = None


class InputLaw(Strict):
    """One uncertain input as drawn: its distribution, source and P10/P50/P90."""

    name: str
    kind: str  # factor (x nominal) | shift (+ nominal) | bytes (the value itself)
    dist: str
    params: dict[str, float]
    source: str
    p10: float
    p50: float
    p90: float


class ArchitectureUncertainty(Strict):
    goodput_rps: Band  # SLA goodput of the planned fleet per draw
    bcr: Band  # requests per dollar at that goodput, at the draw's prices (capacity per dollar)
    cost_per_hour: Band
    # the verdict's: $/hour of the cheapest fleet of the plan's types meeting the SLA at the
    # planned (drawn) rate, per draw (uncertainty/sizing.py); absent in earlier files
    planned_cost_per_hour: Band | None = Field(default=None, exclude_if=lambda v: v is None)
    meets_sla_share: float = Field(ge=0, le=1)  # draws whose goodput covers the (drawn) rate
    # SLA goodput (nominal inputs) with one instance of a role lost, or one line down
    n_minus_1: dict[str, float] = {}


class TornadoRow(Strict):
    input: str
    low: float  # the input at its P10 (a planning margin: the low end of its stated range)
    high: float  # and at its P90 (a margin: the high end)
    gain_low: float | None  # PDD's gain (the verdict's figure) there, others at their medians
    gain_high: float | None


class Versus(Strict):
    """PDD's plan against one baseline's, draw by draw (paired), on the one verdict: requests
    per dollar at the planned rate on each side's cheapest fleet meeting the SLA (at one rate,
    the baseline's cost over PDD's); the capacity figures are the second, named one."""

    baseline: str
    p_beats: float = Field(ge=0, le=1)  # share of draws where PDD's verdict figure is higher
    stderr: float = Field(ge=0)  # binomial Monte Carlo standard error of p_beats
    ties: float = Field(ge=0, le=1)  # share of draws with equal figures (e.g. the same fleet)
    gain: Band
    median_gain: float | None  # every input at its median
    # capacity goodput per dollar of the planned fleets as they are (absent in earlier files)
    capacity_gain: Band | None = Field(default=None, exclude_if=lambda v: v is None)
    capacity_median_gain: float | None = Field(default=None, exclude_if=lambda v: v is None)
    # the verdict at the plan's own (nominal) inputs, as the draws compute it: the headline's
    # figure (comparison.bcr_gain_vs_<baseline>) found again; and with each planning margin at
    # its stated range's ends (input: the margin, low/high its values there)
    nominal_gain: float | None = Field(default=None, exclude_if=lambda v: v is None)
    nominal_margins: list[TornadoRow] = Field(default=[], exclude_if=lambda v: not v)
    flip: str  # the sentence: which input flips the ranking, and where
    tornado: list[TornadoRow]


class DrawRow(Strict):
    values: dict[str, float]
    goodput_rps: dict[str, float]
    bcr: dict[str, float]  # capacity per dollar
    # the verdict's figure (absent in earlier files)
    planned_bcr: dict[str, float] = Field(default={}, exclude_if=lambda v: not v)


class RobustArchitecture(Strict):
    nominal_cost_per_hour: float
    robust_cost_per_hour: float | None  # None: no fleet found meeting the share
    cost_of_robustness: float | None  # robust / nominal - 1
    met_share: float = Field(ge=0, le=1)  # share of the design draws the fleet meets
    design_draw: int | None  # the draw it was planned at (None: the nominal fleet already met)
    replans: int = Field(ge=0)
    note: str | None = None


class Robust(Strict):
    """How the robust fleets were planned (uncertainty/robust.py, docs/model.md)."""

    q: float = Field(gt=0, lt=1)
    draws: int = Field(ge=1)  # independent draws the share is counted over
    seed: int = Field(ge=0)
    method: str
    rate_note: str | None = None  # objective bcr: the rate is the nominal optimum's
    architectures: dict[str, RobustArchitecture]


class VerifiedDraws(Strict):
    """K of the draws replayed in the simulator (uncertainty/replay.py)."""

    replays: int = Field(ge=1)
    sim_requests: int = Field(ge=1)
    sim_met_share: float = Field(ge=0, le=1)  # replays meeting the SLA at the drawn rate
    analytic_met_share: float = Field(ge=0, le=1)  # the analytic verdict on the same draws
    agree_share: float = Field(ge=0, le=1)
    partial: bool  # some drawn inputs (prefix hit, KV in memory, unequal speeds) not replayed


class PlanFlips(Strict):
    """Each architecture re-planned at the P10/P90 corners of the strongest inputs."""

    inputs: list[str]
    corners: int = Field(ge=1)
    line_changes: dict[str, int]  # corners whose plan has another line option
    count_changes: dict[str, int]  # corners whose plan has another instance count or size
    no_plan: dict[str, int]  # corners with no plan at all


class MarginCost(Strict):
    """What a planning margin the scenario keeps costs one architecture's plan: the plan's
    fleet against the cheapest of its types meeting the SLA without the margin (nominal
    inputs, evaluate's analytic check)."""

    architecture: str
    margin: str  # e.g. decode_utilization
    value: float  # the margin as kept
    without: float  # its no-margin value
    instances: dict[str, int]  # role (or "line") -> instances (lines) the margin adds
    cost_per_hour: float  # $/hour the margin adds (0: it adds nothing)
    text: str


class PlanUncertainty(Strict):
    draws: int = Field(ge=1)
    seed: int = Field(ge=0)
    method: str
    inputs: list[InputLaw]
    notes: list[str]
    architectures: dict[str, ArchitectureUncertainty]
    comparisons: dict[str, Versus]
    break_even: str | None = None
    robust: Robust | None = None
    confirmed: dict[str, VerifiedDraws] = {}  # the JSON key readers know: the verified draws
    plan_flips: PlanFlips | None = None
    margin_costs: list[MarginCost] = Field(default=[], exclude_if=lambda v: not v)
    per_draw: list[DrawRow]
