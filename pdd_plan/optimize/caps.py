"""The utilization caps one solve runs under; verification by simulation tightens them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Caps:
    """Utilization caps; verification by simulation tightens the one that bottlenecks."""

    # the classes' defaults are search's (inputs/schema/scenario.py, where each is explained);
    # a plan's caps come from its scenario through Caps.of
    prefill: float = 0.97
    line: float = 0.95
    decode: float = 0.9
    line_delay: float = 1.0  # multiplies analytic line transfer times (the PS mean)

    @classmethod
    def of(cls, search) -> Caps:
        """The caps a scenario's `search:` sets (each a stated input with its reason): decode's
        a margin below 1; prefill's and the line's the laws' reach, or a margin below it."""
        return cls(
            prefill=search.prefill_utilization,
            line=search.line_utilization,
            decode=search.decode_utilization,
        )

    def tightened(self, which: str, used: float, factor: float = 0.9) -> Caps:
        """The cap on `which` set 10% below what the plan used (or below the old cap). For the
        line, first stretch its transfer-time estimate instead: the PS mean misses the tail, and
        a longer estimate lets the plan relay more or buy a line rather than just cap it."""
        if which == "line" and self.line_delay < 2.0:
            return Caps(**{**self.__dict__, "line_delay": self.line_delay / factor**3})
        return self.capped(which, used, factor)

    def capped(self, which: str, used: float, factor: float = 0.9) -> Caps:
        """The cap on `which` set 10% below what the plan used (or below the old cap): what
        `tightened` does once stretching the line's estimate is spent (or found no plan)."""
        cap = min(getattr(self, which), used) * factor
        return Caps(**{**self.__dict__, which: cap})
