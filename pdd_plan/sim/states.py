"""The decode replay's named request states and event kinds."""

from __future__ import annotations

from enum import IntEnum


class State(IntEnum):
    """Where a request is in decode."""

    NEW = 0  # KV not at any decode instance yet
    QUEUED_RLD = 1  # waiting for a relay-decode batch
    ON_RLD = 2  # decoding on relay decode
    PAUSED = 3  # hit the relay cap before its KV crossed the line
    DONE_RLD = 4  # finished on relay decode
    ON_MD = 5  # handed to main decode (waiting, running or finished there)


class Event(IntEnum):
    """What happens to a request. Static events (known before the run) sort by (time, kind,
    request), so their values order same-time ties; dynamic ones come from the event heap."""

    KV_AT_RLD = 0  # KV arrived at relay decode over RDMA
    KV_AT_MD = 1  # p_md: KV delivered at main decode
    HANDOFF = 2  # p_rld_md: the KV has crossed the line
    EXTENDED = 11  # MD finished extending the relay's tokens: join an MD batch
    CAUGHT_UP = 12  # catch_up: MD extended the first k0 relay tokens, RLD hands over
