"""Per-request distributions in the scenario: fixed, clipped lognormal, or a histogram."""

from pydantic import Field, model_validator

from pdd_plan.common import limits
from pdd_plan.inputs.schema.common import Strict


class Lognormal(Strict):
    mu: float
    """Mean of the logarithm of the value."""
    sigma: float = Field(ge=0)
    """Standard deviation of the logarithm (0: every draw is exp(mu))."""
    min: float = Field(ge=0)
    """Draws below this are clipped to it."""
    max: float = Field(gt=0)
    """Draws above this are clipped to it."""

    @model_validator(mode="after")
    def _order(self) -> "Lognormal":
        if self.min > self.max:
            raise ValueError("lognormal min must not exceed max")
        return self


class Distribution(Strict):
    """Exactly one of fixed / lognormal / histogram ([[lo, hi, share], ...], shares sum to 1)."""

    fixed: float | None = Field(default=None, ge=0)
    """Every request has this value."""
    lognormal: Lognormal | None = None
    """A clipped lognormal: `{mu, sigma, min, max}`."""
    histogram: list[tuple[float, float, float]] | None = None
    """Bins `[[lo, hi, share], ...]`: a share of requests drawn uniformly in [lo, hi]; shares sum
    to 1."""

    @model_validator(mode="after")
    def _one_kind(self) -> "Distribution":
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


def token_range(v: Distribution | None) -> Distribution | None:
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
    assert lo is not None and hi is not None  # a distribution is one of the three (validated)
    if lo < 1:
        raise ValueError(f"token counts must be >= 1 (got {lo:g})")
    if v.fixed is not None and v.fixed != int(v.fixed):
        raise ValueError(f"a fixed token count is a whole number (got {v.fixed:g})")
    if not hi <= limits.value("TOKENS"):
        raise ValueError(limits.exceeded("TOKENS", hi))
    return v


def hit_range(v: Distribution) -> Distribution:
    hi = v.fixed if v.fixed is not None else None
    if v.histogram is not None:
        hi = max(b[1] for b in v.histogram)
    if v.lognormal is not None:
        hi = v.lognormal.max
    if hi is not None and hi > 1.0:
        raise ValueError("prefix hit rates are fractions in [0, 1]")
    return v
