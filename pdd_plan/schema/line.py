"""Leased cross-datacenter Ethernet line SKU."""

from __future__ import annotations

from pydantic import Field, PositiveFloat, PositiveInt

from .common import MAX_LINE_GBPS, MAX_LINE_USD_PER_MONTH, Strict


class LineSKU(Strict):
    name: str
    gbps: float = Field(gt=0, le=MAX_LINE_GBPS)  # line rate, Gb/s
    cost_per_month: float = Field(gt=0, le=MAX_LINE_USD_PER_MONTH)  # USD per month
    rtt_ms: float = Field(default=10.0, ge=0)
    tcp_efficiency: float = Field(default=0.9, gt=0, le=1)  # goodput / line rate (headers, acks)
    connections: PositiveInt = 16  # transfer connection-pool size
    per_connection_gbps: PositiveFloat | None = None  # one TCP flow's ceiling; None: line rate
    source: str = "user input"

    @property
    def cost_per_hour(self) -> float:
        return self.cost_per_month * 12.0 / 8760.0

    @property
    def bytes_per_s(self) -> float:
        """Usable bytes/s of one line."""
        return self.gbps * 1e9 / 8.0 * self.tcp_efficiency
