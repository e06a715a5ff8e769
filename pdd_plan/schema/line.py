"""Leased cross-datacenter Ethernet line SKU, and the TCP path its KV transfers run over."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveFloat, PositiveInt

from .common import Strict

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


class LineSKU(Strict):
    name: str
    gbps: PositiveFloat  # line rate, Gb/s
    cost_per_month: PositiveFloat  # USD per month
    rtt_ms: float = Field(default=10.0, ge=0)
    tcp_efficiency: float = Field(default=0.9, gt=0, le=1)  # goodput / line rate (headers, acks)
    connections: PositiveInt = 16  # transfer connection-pool size (one transfer per connection)
    # one TCP flow's ceiling, Gb/s: an override (e.g. measured); None: from the path below
    per_connection_gbps: PositiveFloat | None = None
    loss_rate: float = Field(default=0.0, ge=0, lt=1)  # non-congestive packet loss probability
    congestion: Literal["loss", "bbr"] = "loss"  # loss-based (Mathis) or BBR (loss-insensitive)
    max_window_bytes: PositiveFloat = DEFAULT_WINDOW_BYTES  # socket buffer / rwnd / cwnd cap
    mss_bytes: PositiveInt = DEFAULT_MSS_BYTES
    initial_window_segments: PositiveInt = DEFAULT_INITIAL_WINDOW
    # 'first_use': persistent connections, slow start once per connection (then kept warm);
    # 'every_transfer': a fresh (or idle-reset) connection per transfer pays it every time
    slow_start: Literal["first_use", "every_transfer"] = "first_use"
    message_bytes: PositiveFloat = 1024 * 1024  # one page/layer message (slice) of a transfer
    message_header_bytes: float = Field(default=DEFAULT_HEADER_BYTES, ge=0)
    message_round_trip: bool = False  # each message waits for an application ack
    source: str = "user input"

    @property
    def cost_per_hour(self) -> float:
        return self.cost_per_month * 12.0 / 8760.0

    @property
    def bytes_per_s(self) -> float:
        """Usable bytes/s of one line."""
        return self.gbps * 1e9 / 8.0 * self.tcp_efficiency
