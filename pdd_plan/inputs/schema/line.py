"""Leased cross-datacenter Ethernet line SKU, and the TCP path its KV transfers run over.

The ``measured_*``, ``rtt_min_ms``, ``retransmit_rate`` and ``tcp_congestion`` fields are
optional: `pdd-plan line calibrate --iperf3` fills them from iperf3 runs
(pdd_plan/calibration/iperf3.py says how each is derived); hand-written profiles leave them out.
"""

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from pdd_plan.inputs.schema.common import MAX_LINE_GBPS, MAX_LINE_USD_PER_MONTH, Name, Strict

# Linux defaults (Documentation/networking/ip-sysctl.rst): net.ipv4.tcp_wmem max 4 MiB bounds
# the bytes a sender keeps in flight; RFC 6928 / Linux initial window of 10 segments; MSS of a
# 1500-byte MTU with TCP timestamps (1500 - 20 IP - 20 TCP - 12 options).
DEFAULT_WINDOW_BYTES = 4 * 1024 * 1024
DEFAULT_MSS_BYTES = 1448
DEFAULT_INITIAL_WINDOW = 10
# Mooncake's TCP transport frames every slice with a SessionHeader {u64 size, u64 addr,
# u8 opcode}: 24 bytes with alignment (mooncake-transfer-engine/src/transport/tcp_transport/
# tcp_transport.cpp), then writes the body; no application-level ack per slice.
DEFAULT_HEADER_BYTES = 24
# Mooncake's TCP transport stripes a batch transfer over a bounded group of persistent
# connections ("lanes") per peer: kDefaultLanesPerPeer = 4 (MC_TCP_LANES_PER_PEER, 1-16), each
# free lane taking the next slice of the peer's FIFO (tcp_transport.cpp, enqueuePooledTransfer),
# and SGLang submits a request's KV as one batch of per-layer slices (disaggregation/mooncake/
# conn.py, _send_kvcache_generic), so one transfer alone keeps all 4 lanes busy.
DEFAULT_STREAMS_PER_TRANSFER = 4
# 16 transfers in flight on a line (assumption, see the bundled profiles' source), each holding
# its streams: the pool's connections
DEFAULT_CONNECTIONS = 16 * DEFAULT_STREAMS_PER_TRANSFER
# Linux's floor on the retransmission timeout, TCP_RTO_MIN = HZ / 5 (include/net/tcp.h): a
# steady connection's RTO is its smoothed RTT plus at least this (tcp_set_rto, __tcp_set_rto)
DEFAULT_RTO_MIN_MS = 200.0
# other tenants' traffic at most this share of the line (a line they fill is no line to plan on)
MAX_BACKGROUND_LOAD = 0.95


class LineSKU(Strict):
    name: Name
    gbps: float = Field(gt=0, le=MAX_LINE_GBPS)  # line rate, Gb/s
    cost_per_month: float = Field(gt=0, le=MAX_LINE_USD_PER_MONTH)  # USD per month
    rtt_ms: float = Field(default=10.0, ge=0)
    tcp_efficiency: float = Field(default=0.9, gt=0, le=1)  # goodput / line rate (headers, acks)
    connections: PositiveInt = DEFAULT_CONNECTIONS  # TCP connections of one line's transfer pool
    # connections one transfer holds and stripes its slices over (its rate: k x one connection's)
    streams_per_transfer: PositiveInt = DEFAULT_STREAMS_PER_TRANSFER
    # one TCP flow's ceiling, Gb/s: an override (e.g. measured); None: from the path below
    per_connection_gbps: PositiveFloat | None = None
    loss_rate: float = Field(default=0.0, ge=0, lt=1)  # non-congestive packet loss probability
    congestion: Literal["loss", "bbr"] = "loss"  # loss-based (Mathis) or BBR (loss-insensitive)
    max_window_bytes: PositiveFloat = DEFAULT_WINDOW_BYTES  # socket buffer / rwnd / cwnd cap
    mss_bytes: PositiveInt = DEFAULT_MSS_BYTES
    initial_window_segments: PositiveInt = DEFAULT_INITIAL_WINDOW
    # 'first_use': persistent connections, slow start once per connection (then kept warm);
    # 'every_transfer': a fresh (or idle-reset) connection per transfer pays it every time;
    # 'after_idle': as Linux with net.ipv4.tcp_slow_start_after_idle=1 (its default): a
    # connection idle longer than its RTO restarts, its window halved per RTO idle, never
    # below the initial window (tcp_cwnd_restart, RFC 2861 / RFC 5681 section 4.1)
    slow_start: Literal["first_use", "every_transfer", "after_idle"] = "first_use"
    rto_min_ms: float = Field(default=DEFAULT_RTO_MIN_MS, ge=0)  # RTO = RTT + this (Linux)
    # other tenants' mean share of the line's capacity; our transfers share the rest
    background_load: float = Field(default=0.0, ge=0, le=MAX_BACKGROUND_LOAD)
    # loss added at a full line: loss at the line's total utilization u (other tenants' and
    # ours) is loss_rate + congestive_loss_rate x u
    congestive_loss_rate: float = Field(default=0.0, ge=0, lt=1)
    # before the line: a fixed per-transfer setup and the sender's copy of the KV out of GPU
    # memory (a fixed part, and a per-byte part at sender_copy_gbps when given)
    setup_ms: float = Field(default=0.0, ge=0)
    sender_copy_ms: float = Field(default=0.0, ge=0)
    sender_copy_gbps: PositiveFloat | None = None
    message_bytes: PositiveFloat = 1024 * 1024  # one page/layer message (slice) of a transfer
    message_header_bytes: float = Field(default=DEFAULT_HEADER_BYTES, ge=0)
    message_round_trip: bool = False  # each message waits for an application ack
    # Measured (iperf3): receiver goodput summed over the parallel streams of a run, Gb/s
    measured_aggregate_gbps: PositiveFloat | None = None
    measured_aggregate_connections: PositiveInt | None = None  # streams of that run (-P N)
    # smallest RTT a sender saw: the path's propagation RTT, without queueing (BBR's min RTT)
    rtt_min_ms: float | None = Field(default=None, ge=0)
    # fraction of full-size segments retransmitted (retransmits x MSS / bytes sent); loss estimate
    retransmit_rate: float | None = Field(default=None, ge=0, le=1)
    tcp_congestion: str | None = None  # the measured sender's congestion control (cubic, bbr, ...)
    source: str = "user input"

    @model_validator(mode="after")
    def _streams_fit_pool(self) -> "LineSKU":
        check_streams(self.streams_per_transfer, self.connections)
        if self.loss_rate + self.congestive_loss_rate >= 1:
            raise ValueError(
                f"loss_rate {self.loss_rate} + congestive_loss_rate {self.congestive_loss_rate}"
                " reaches 1 at a full line: a packet loss probability is below 1; lower either"
            )
        return self

    @property
    def cost_per_hour(self) -> float:
        return self.cost_per_month * 12.0 / 8760.0

    @property
    def bytes_per_s(self) -> float:
        """Usable bytes/s of one line for our transfers: its goodput less other tenants' share."""
        return self.gbps * 1e9 / 8.0 * self.tcp_efficiency * (1.0 - self.background_load)

    @property
    def rto_s(self) -> float:
        """A steady connection's retransmission timeout: RTT plus the RTO floor (Linux)."""
        return (self.rtt_ms + self.rto_min_ms) / 1e3

    def loss_at(self, utilization: float) -> float:
        """Packet loss at the line's total utilization (other tenants' and ours, 0-1)."""
        u = min(max(float(utilization), 0.0), 1.0)
        return self.loss_rate + self.congestive_loss_rate * u


def check_streams(streams: int, connections: int) -> None:
    """A transfer holds ``streams`` connections of the pool: the pool must hold one transfer."""
    if streams > connections:
        raise ValueError(
            f"streams_per_transfer {streams} exceeds connections {connections}: a transfer holds"
            " streams_per_transfer connections of the pool; lower it or raise connections"
        )
