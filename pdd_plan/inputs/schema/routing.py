"""The PDD report's routing rule as an input: the hit threshold it relays at or below."""

from pydantic import Field

from pdd_plan.inputs.schema.common import Strict


class HitThreshold(Strict):
    """A prefill-side hit rate to relay at or below, and where the figure comes from."""

    at_or_below: float = Field(default=0.95, ge=0, le=1)
    """Relay requests whose prefill-side hit rate is at most this."""
    source: str = (
        "PDD report (pdd-facts.md): most requests hit above 95% and go straight P -> MD; "
        "only the low-hit minority goes through relay decode"
    )
    """Where the threshold comes from (never tuned to a result)."""
