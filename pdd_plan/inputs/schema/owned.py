"""Owned capacity: GPUs and lines that already exist, and the price at which they count.

`optimize` plans the increment on top: a datacenter's owned GPUs of a type are used first at
their owned price (0: sunk; or an amortized $/GPU-hour), anything beyond at the scenario's
price; the same for owned lines of a SKU ($/line-month). The datacenter's `gpus:` stays what
can exist there in total, owned GPUs included, so owned <= available (checked here against
the scenario by `check_against`).
"""

from pydantic import Field, NonNegativeInt, field_validator, model_validator

from pdd_plan.common import limits
from pdd_plan.inputs.schema.common import Strict

# a price is finite (Strict forbids NaN and inf) and far above any real one: catches typos
MAX_PRICE = 1e9


class OwnedGPUs(Strict):
    """`count` GPUs of type `gpu` already in `datacenter`, each counted at `cost_per_gpu_hour`."""

    datacenter: str
    """Datacenter the GPUs are in."""
    gpu: str
    """GPU profile name."""
    count: NonNegativeInt
    """GPUs owned (at most the datacenter's `gpus` for that type)."""
    cost_per_gpu_hour: float = Field(ge=0, le=MAX_PRICE)
    """What an owned GPU counts at: 0 if sunk, else its amortized $/GPU-hour."""

    @field_validator("count")
    @classmethod
    def _count(cls, v: int) -> int:
        if not v <= limits.value("GPUS"):
            raise ValueError(limits.exceeded("GPUS", v))
        return v


class OwnedLines(Strict):
    """`count` lines of SKU `sku` already leased, each counted at `cost_per_month`."""

    sku: str  # a name in link.candidates (a profile name, or an inline line's name)
    """A line name in `link.candidates` (a profile name, or an inline line's name)."""
    count: NonNegativeInt
    """Lines of that SKU owned."""
    cost_per_month: float = Field(ge=0, le=MAX_PRICE)
    """What an owned line counts at: 0 if sunk, else its amortized $/month."""

    @field_validator("count")
    @classmethod
    def _count(cls, v: int) -> int:
        if not v <= limits.value("LINES"):
            raise ValueError(limits.exceeded("LINES", v))
        return v


class Owned(Strict):
    gpus: list[OwnedGPUs] = []
    """Owned GPUs per datacenter and type."""
    lines: list[OwnedLines] = []
    """Owned lines per SKU."""

    @model_validator(mode="after")
    def _unique(self) -> "Owned":
        keys = [(g.datacenter, g.gpu) for g in self.gpus]
        for k in keys:
            if keys.count(k) > 1:
                raise ValueError(f"owned.gpus lists {k[1]} in {k[0]} more than once")
        skus = [ln.sku for ln in self.lines]
        for s in skus:
            if skus.count(s) > 1:
                raise ValueError(f"owned.lines lists SKU '{s}' more than once")
        return self


def check_against(owned: Owned, available: dict[str, dict[str, int]], skus: list[str]) -> None:
    """ValueError (the schema's one-line error) unless every owned entry names one of the
    scenario's datacenters, a GPU type that datacenter lists (at most its `gpus:` count: that
    is the site's total, owned included) and a line SKU among link.candidates."""
    for i, g in enumerate(owned.gpus):
        where = f"owned.gpus[{i}]"
        if g.datacenter not in available:
            have = ", ".join(available)
            raise ValueError(f"{where}: unknown datacenter '{g.datacenter}' (have {have})")
        have_gpus = available[g.datacenter]
        if g.gpu not in have_gpus:
            listed = ", ".join(have_gpus) or "none"
            raise ValueError(
                f"{where}: GPU '{g.gpu}' is not listed in datacenter {g.datacenter}'s gpus "
                f"(listed: {listed}); add it there (gpus: is the site's total, owned included)"
            )
        if g.count > have_gpus[g.gpu]:
            raise ValueError(
                f"{where}: {g.count} owned {g.gpu} is more than the {have_gpus[g.gpu]} "
                f"datacenters[{g.datacenter}].gpus.{g.gpu} says can exist there (that count is "
                "the total, owned included): raise it or lower owned"
            )
    for i, ln in enumerate(owned.lines):
        if ln.sku not in skus:
            have = ", ".join(skus) or "none (no link)"
            raise ValueError(
                f"owned.lines[{i}]: SKU '{ln.sku}' is not among link.candidates (have {have})"
            )
