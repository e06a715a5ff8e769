"""The scenario's `uncertainty:` section: which inputs are not known exactly, each with a
distribution and where that distribution comes from.

Every input but two is a factor on the nominal value (1: as the scenario says); `prefix_hit`
is a shift of every request's prefill-side hit fraction (0: as the scenario says), and
`request_state_bytes` a byte count (as the model profile says when not drawn).
The perf speeds default to the shipped error band of the model's family (bias included), so a
scenario without the section still has that one uncertainty.
"""

import math
from statistics import NormalDist
from typing import Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from pdd_plan.common import limits
from pdd_plan.inputs.schema.common import Strict
from pdd_plan.inputs.schema.model import MAX_REQUEST_STATE_BYTES

DISTRIBUTIONS = ("normal", "lognormal", "uniform", "triangular")
# the parameters each distribution takes (all others must be left out)
PARAMETERS = {
    "normal": ("mean", "sd"),
    "lognormal": ("median", "sigma"),
    "uniform": ("low", "high"),
    "triangular": ("low", "mode", "high"),
}


class Spread(Strict):
    """One uncertain input's distribution: `dist` and its parameters, and a `source`."""

    dist: Literal["normal", "lognormal", "uniform", "triangular"]
    """The distribution: `normal` (mean, sd), `lognormal` (median, sigma of the log),
    `uniform` (low, high) or `triangular` (low, mode, high)."""
    mean: float | None = None
    """`normal`: the mean."""
    sd: float | None = None
    """`normal`: the standard deviation (>= 0)."""
    median: float | None = None
    """`lognormal`: the median (> 0)."""
    sigma: float | None = None
    """`lognormal`: the standard deviation of the logarithm (>= 0)."""
    low: float | None = None
    """`uniform`, `triangular`: the lowest value."""
    mode: float | None = None
    """`triangular`: the most likely value (between low and high)."""
    high: float | None = None
    """`uniform`, `triangular`: the highest value (>= low)."""
    source: str = Field(min_length=1, max_length=500)
    """Where the distribution comes from (a document, a measurement), or `assumption`."""

    @model_validator(mode="after")
    def _parameters(self) -> "Spread":
        need = PARAMETERS[self.dist]
        for name in ("mean", "sd", "median", "sigma", "low", "mode", "high"):
            given = getattr(self, name) is not None
            if name in need and not given:
                raise ValueError(f"{self.dist} needs {', '.join(need)} ({name} is missing)")
            if name not in need and given:
                raise ValueError(f"{self.dist} takes {', '.join(need)}, not {name}")
        for name in ("sd", "sigma"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"{name} is a spread and must not be negative (got {v:g})")
        if self.median is not None and self.median <= 0:
            raise ValueError(f"a lognormal's median must be positive (got {self.median:g})")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"low {self.low:g} is above high {self.high:g}: a negative spread")
        if self.mode is not None and not self.low <= self.mode <= self.high:  # type: ignore[operator]
            raise ValueError(f"mode {self.mode:g} must lie between low and high")
        return self

    def centre(self) -> float:
        """The distribution's median (its inverse CDF at 1/2, as the draws' `Law` gives it)."""
        # the validator requires each distribution's own parameters: present here
        if self.dist == "normal":
            assert self.mean is not None
            return float(self.mean)
        if self.dist == "lognormal":
            assert self.median is not None
            return float(self.median)
        assert self.low is not None and self.high is not None
        lo, hi = float(self.low), float(self.high)
        if self.dist == "uniform" or hi == lo:
            return 0.5 * (lo + hi)
        assert self.mode is not None
        m = float(self.mode)  # triangular: the arm holding half the mass
        if (m - lo) / (hi - lo) >= 0.5:
            return lo + math.sqrt(0.5 * (hi - lo) * (m - lo))
        return hi - math.sqrt(0.5 * (hi - lo) * (hi - m))


class Inputs(Strict):
    """The uncertain inputs by name (unknown names are errors). Factors multiply the nominal
    value; draws of a factor at or below 0 are clipped to 1% of it."""

    prefill_speed: Spread | None = None
    """Factor on the perf model's prefill speed (every pass 1/factor as long). Omitted: the
    shipped error band of the model's family (data/calibration/error_band.yaml), its bias
    included. The plan is made at its median when decode_speed's median is the same (one GPU
    profile runs both roles), else at the perf model's speed."""
    decode_speed: Spread | None = None
    """Factor on the perf model's decode speed. Omitted: the shipped error band, like
    prefill_speed."""
    perf_correlation: float = Field(default=1.0, ge=-1, le=1)
    """Correlation of the prefill and decode speed draws (one GPU and model family; Gaussian
    copula). The band's file has no per-phase split, so 1 (one factor for both) is an
    assumption."""
    kv_bytes: Spread | None = None
    """Factor on the KV bytes a request holds in decode memory and sends across the line (per
    token and per-request state together)."""
    request_state_bytes: Spread | None = None
    """Bytes per request, independent of its length, that cross the line with its KV and sit
    in decode memory with it (the model profile's `kv_cache.per_request_state_bytes`, on top
    of what the attention layout gives, e.g. DeepSeek-V4's window): a value, not a factor; the
    drawn value replaces the profile's (draws below 0 are 0), times `kv_bytes` when drawn; the
    plan is made at the band's median."""
    line_rate: Spread | None = None
    """Factor on one TCP connection's rate over the line (an RTT or window the user may not
    know); the line's capacity stays."""
    gpu_price: Spread | None = None
    """Factor on every GPU's $/hour."""
    line_price: Spread | None = None
    """Factor on the line's $/month."""
    rate: Spread | None = None
    """Factor on the request rate (a forecast band): whether a plan meets the SLA at its
    planned rate is judged at the drawn rate."""
    prefix_hit: Spread | None = None
    """Shift of every request's prefill-side prefix-hit fraction (clipped to [0, 1]; MD's hit
    moves with it)."""

    @field_validator(
        "prefill_speed", "decode_speed", "kv_bytes", "line_rate", "gpu_price", "line_price",
        "rate", "prefix_hit",
    )  # fmt: skip
    @classmethod
    def _spread_bounded(cls, s: Spread | None, info: ValidationInfo) -> Spread | None:
        if s is not None:
            check_spread(str(info.field_name), s)
        return s

    @field_validator("request_state_bytes")
    @classmethod
    def _bytes_in_range(cls, s: Spread | None) -> Spread | None:
        if s is None:
            return s
        most = MAX_REQUEST_STATE_BYTES
        for name in ("mean", "median", "low", "mode", "high", "sd"):
            v = getattr(s, name)
            if v is not None and not 0 <= v <= most:
                raise ValueError(f"{name} {v:g} is not a byte count: give 0 to {most:g} bytes")
        if s is not None:
            check_spread("request_state_bytes", s)
        return s


class Uncertainty(Strict):
    """How sure the plan is: draws of the uncertain inputs, every plan evaluated under each."""

    draws: PositiveInt = 32
    """Draws (Latin hypercube, the same for every architecture)."""
    seed: int = Field(default=0, ge=0)
    """Seed of the draws: same inputs and seed, same draws."""
    inputs: Inputs = Inputs()
    """The uncertain inputs and their distributions."""

    @field_validator("draws")
    @classmethod
    def _draws_limit(cls, v: int) -> int:
        if v > limits.value("DRAWS"):
            raise ValueError(limits.exceeded("DRAWS", v))
        if v < 2:
            raise ValueError("at least 2 draws (a probability needs more than one)")
        return v


# the inputs a draw moves, in the order the report lists them
NAMES = (
    "prefill_speed",
    "decode_speed",
    "kv_bytes",
    "request_state_bytes",
    "line_rate",
    "gpu_price",
    "line_price",
    "rate",
    "prefix_hit",
)
Kind = Literal["factor", "shift", "bytes"]


def kind(name: str) -> Kind:
    """factor: x nominal (1); shift: + nominal (0); bytes: the value itself (nominal: the
    model profile's)."""
    if name == "request_state_bytes":
        return "bytes"
    return "shift" if name == "prefix_hit" else "factor"


# the tails the spread bound is read at: the draws' 0.1% and 99.9% quantiles
TAIL = 1e-3


def tails(s: Spread) -> tuple[float, float]:
    """The distribution's TAIL and 1 - TAIL quantiles (closed forms; the stdlib's normal)."""
    if s.dist in ("normal", "lognormal"):
        z = NormalDist().inv_cdf(1 - TAIL)
        if s.dist == "normal":
            assert s.mean is not None and s.sd is not None  # the validator requires them
            return s.mean - z * s.sd, s.mean + z * s.sd
        assert s.median is not None and s.sigma is not None
        lo, hi = (-z * s.sigma, z * s.sigma)
        return (s.median * math.exp(max(lo, -700.0)), s.median * math.exp(min(hi, 700.0)))
    assert s.low is not None and s.high is not None
    lo, hi = s.low, s.high
    if s.dist == "uniform" or hi == lo:
        return lo + TAIL * (hi - lo), hi - TAIL * (hi - lo)
    m = s.mode
    assert m is not None
    left = lo + (TAIL * (hi - lo) * (m - lo)) ** 0.5 if m > lo else lo + TAIL * (hi - lo)
    right = hi - (TAIL * (hi - lo) * (hi - m)) ** 0.5 if m < hi else hi - TAIL * (hi - lo)
    return left, right


def check_spread(name: str, s: Spread) -> None:
    """One bound on every spread (limit FACTOR_SPREAD): a factor's 0.1% and 99.9% quantiles
    within [1/N, N] x nominal (draws are never floored unseen: a spread that reaches below 1/N
    is refused, not clipped), a shift's within [-1, 1], a byte count's upper one a byte count."""
    lo, hi = tails(s)
    k = kind(name)
    if k == "factor":
        n = limits.value("FACTOR_SPREAD")
        ok, what = (1.0 / n <= lo and hi <= n), f"within [{1.0 / n:g}, {n:g}] x nominal"
    elif k == "shift":
        ok, what = (-1.0 <= lo and hi <= 1.0), "within [-1, 1] (a hit fraction's shift)"
    else:
        ok, what = hi <= MAX_REQUEST_STATE_BYTES, f"at most {MAX_REQUEST_STATE_BYTES:g} bytes"
    if not ok:
        hint = (
            "; a lognormal keeps a factor positive" if s.dist == "normal" and k == "factor" else ""
        )
        raise ValueError(
            f"{s.dist}'s 0.1% and 99.9% quantiles are {lo:.3g} and {hi:.3g}, not {what}: "
            f"narrow the spread{hint}"
            + (f" (or {limits.raise_hint('FACTOR_SPREAD')})" if k == "factor" else "")
        )
