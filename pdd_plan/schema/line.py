"""Leased cross-datacenter Ethernet line SKU.

The ``measured_*``, ``rtt_min_ms``, ``retransmit_rate``, ``mss_bytes`` and ``tcp_congestion``
fields are optional: `pdd-plan line calibrate --iperf3` fills them from iperf3 runs
(pdd_plan/network_calibrate.py says how each is derived); hand-written profiles leave them out.
"""

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
    # Measured (iperf3): receiver goodput summed over the parallel streams of a run, Gb/s
    measured_aggregate_gbps: PositiveFloat | None = None
    measured_aggregate_connections: PositiveInt | None = None  # streams of that run (-P N)
    # smallest RTT a sender saw: the path's propagation RTT, without queueing (BBR's min RTT)
    rtt_min_ms: float | None = Field(default=None, ge=0)
    # fraction of full-size segments retransmitted (retransmits x MSS / bytes sent); loss estimate
    retransmit_rate: float | None = Field(default=None, ge=0, le=1)
    mss_bytes: PositiveInt | None = None  # TCP maximum segment size of the measured path
    tcp_congestion: str | None = None  # the sender's congestion control (cubic, bbr, ...)
    source: str = "user input"

    @property
    def cost_per_hour(self) -> float:
        return self.cost_per_month * 12.0 / 8760.0

    @property
    def bytes_per_s(self) -> float:
        """Usable bytes/s of one line."""
        return self.gbps * 1e9 / 8.0 * self.tcp_efficiency
