"""Read one `iperf3 -J` TCP run: every field the line profile uses, checked where it is read.

Which fields make which profile number is `iperf3`'s docstring. Here each is checked as JSON
gives it: a count that is a string, a negative byte count or RTT, a rate of 1e300 or NaN is a
one-line error naming the file and the dotted field, never a profile built on it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdd_plan.calibration.json_fields import count, number, string
from pdd_plan.common import numbers
from pdd_plan.common.errors import InputError
from pdd_plan.common.files import read_text
from pdd_plan.inputs.schema.common import MAX_LINE_GBPS

KEYS = ("start", "end")  # what every iperf3 -J document has, even an error report
FIX_RECORD = "give the JSON that `iperf3 -c HOST -J` wrote (TCP)"
# Streams of one run: iperf3 itself caps -P at 128.
MAX_STREAMS = 128
MAX_RTT_US = 60e6  # a minute: no path a line profile describes is slower


@dataclass(frozen=True)
class Iperf3Run:
    """One `iperf3 -J` TCP run, reduced to what a line profile uses."""

    file: str  # as given, for errors
    name: str  # file name, for the source text
    version: str
    time: str  # start.timestamp.time, as iperf3 wrote it
    host: str  # the server the client connected to
    streams: int
    reverse: bool
    seconds: float
    goodput_gbps: float  # receiver side, all streams
    sent_bytes: int
    retransmits: int | None  # None when the sender had no tcp_info counters
    mean_rtt_us: tuple[float, ...]  # per stream; empty when reversed or unreported (0)
    min_rtt_us: tuple[float, ...]
    mss_bytes: int | None
    congestion: str | None


def _load_json(path: str) -> Any:
    raw = read_text(path, FIX_RECORD)
    if not raw.strip():
        raise InputError(path, None, "empty file", FIX_RECORD)
    try:
        return numbers.load_document(raw, path, FIX_RECORD)
    except json.JSONDecodeError as e:
        # a parse error at the very end of the text: iperf3 was killed mid-write
        if e.pos >= len(raw.rstrip()):
            raise InputError(
                path, None, "truncated JSON (the file ends mid-document)", FIX_RECORD
            ) from None
        raise InputError(
            path, None, f"not JSON (line {e.lineno}, column {e.colno}: {e.msg})", FIX_RECORD
        ) from None
    except RecursionError:
        raise InputError(path, None, "JSON nested too deeply", FIX_RECORD) from None


def _field(data: Any, path: str, file: str, kind: type | tuple[type, ...]) -> Any:
    """``data[a][b]...`` for a dotted ``path``, of type ``kind``, else a one-line error."""
    cur = data
    for key in path.split("."):
        if not isinstance(cur, dict) or key not in cur:
            raise InputError(file, path, "missing from the iperf3 output", FIX_RECORD)
        cur = cur[key]
    if isinstance(cur, bool) or not isinstance(cur, kind):
        raise InputError(file, path, f"unexpected value {cur!r}"[:200], FIX_RECORD)
    return cur


def _optional(d: dict, key: str, where: str, file: str, **bounds: Any) -> float | None:
    """``d[key]`` checked as a number (absent or null: None)."""
    v = d.get(key)
    return None if v is None else number(v, file, f"{where}.{key}", FIX_RECORD, **bounds)


def _optional_text(d: Any, key: str, where: str, file: str, default: str | None) -> str | None:
    v = d.get(key) if isinstance(d, dict) else None
    return default if v is None else string(v, file, f"{where}.{key}", FIX_RECORD)


def _check_kind(data: Any, file: str) -> None:
    if isinstance(data, dict) and "error" in data:
        err = string(data["error"], file, "error", FIX_RECORD)
        raise InputError(file, None, f"iperf3 reported an error: {err}", "rerun the measurement")
    if not isinstance(data, dict) or not all(isinstance(data.get(k), dict) for k in KEYS):
        raise InputError(
            file, None, "not iperf3 output (no 'start' / 'end' keys)", "give `iperf3 -J` output"
        )
    test = data["start"].get("test_start") or {}
    protocol = _optional_text(test, "protocol", "start.test_start", file, "TCP")
    streams = data["end"].get("streams")
    if streams is not None and not isinstance(streams, list):
        raise InputError(file, "end.streams", f"must be a list (got {streams!r})"[:200], FIX_RECORD)
    udp = protocol != "TCP" or any(isinstance(s, dict) and "udp" in s for s in streams or [])
    if udp:
        raise InputError(
            file, None, f"a {protocol} run (-u) has no TCP sender statistics", "record with TCP"
        )
    if not streams:
        raise InputError(
            file, "end.streams", "empty: the run did not finish", "rerun the measurement"
        )


def _stream_stats(streams: list, file: str) -> tuple[int, int | None, list[float], list[float]]:
    """Sender bytes, retransmits, mean and min RTTs (µs, non-zero only) over the streams."""
    retrans: int | None
    sent, retrans, mean_rtt, min_rtt = 0, 0, [], []
    for i, s in enumerate(streams):
        where = f"end.streams[{i}].sender"
        sender = s.get("sender") if isinstance(s, dict) else None
        if not isinstance(sender, dict) or sender.get("bytes") is None:
            raise InputError(file, f"{where}.bytes", "missing", FIX_RECORD)
        sent += count(sender["bytes"], file, f"{where}.bytes", FIX_RECORD, lo=0)
        r = _optional(sender, "retransmits", where, file, whole=True)
        retrans = None if retrans is None or r is None else retrans + int(r)
        # 0 or absent: not measured here (the -R client reports 0)
        if m := _optional(sender, "mean_rtt", where, file, hi=MAX_RTT_US):
            mean_rtt.append(m)
        if m := _optional(sender, "min_rtt", where, file, hi=MAX_RTT_US):
            min_rtt.append(m)
    return sent, retrans, mean_rtt, min_rtt


def _mss(start: dict, file: str) -> int | None:
    """start.tcp_mss (set with -M; 0 when not) else start.tcp_mss_default."""
    for key in ("tcp_mss", "tcp_mss_default"):
        v = _optional(start, key, "start", file, hi=1e6, whole=True)
        if v:
            return int(v)
    return None


def _received(data: dict, file: str) -> tuple[float, float]:
    """Receiver goodput (bits/s, above 0 and at most a line's rate) and its seconds."""
    where = "end.sum_received"
    received = _field(data, where, file, dict)
    if received.get("bits_per_second") is None:
        raise InputError(file, f"{where}.bits_per_second", "missing", FIX_RECORD)
    bps = number(
        received["bits_per_second"],
        file,
        f"{where}.bits_per_second",
        FIX_RECORD,
        hi=MAX_LINE_GBPS * 1e9,
    )
    if bps <= 0:
        raise InputError(file, f"{where}.bits_per_second", "no data arrived", FIX_RECORD)
    seconds = _optional(received, "seconds", where, file, hi=1e9) or 0.0
    return bps, seconds


def read_iperf3(file: str) -> Iperf3Run:
    """Parse one `iperf3 -J` file; one-line InputErrors for anything else."""
    data = _load_json(file)
    _check_kind(data, file)
    test = _field(data, "start.test_start", file, dict)
    streams = _field(data, "end.streams", file, list)
    key = "start.test_start.num_streams"
    n = count(_field(data, key, file, (int, float)), file, key, FIX_RECORD, hi=MAX_STREAMS)
    if len(streams) != n:  # --bidir runs list both directions
        raise InputError(
            file,
            "end.streams",
            f"{len(streams)} streams for num_streams {n} (a --bidir run?)",
            "record one direction at a time (-R for the reverse)",
        )
    reverse = _optional(test, "reverse", "start.test_start", file, hi=1, whole=True)
    bps, seconds = _received(data, file)
    sent, retrans, mean_rtt, min_rtt = _stream_stats(streams, file)
    start, end = data["start"], data["end"]
    return Iperf3Run(
        file=file,
        name=Path(file).name,
        version=str(
            _optional_text(start, "version", "start", file, "iperf3 (version not reported)")
        ),
        time=str(
            _optional_text(
                start.get("timestamp"), "time", "start.timestamp", file, "time not reported"
            )
        ),
        host=str(
            _optional_text(start.get("connecting_to"), "host", "start.connecting_to", file, "?")
        ),
        streams=n,
        reverse=bool(reverse),
        seconds=seconds,
        goodput_gbps=bps / 1e9,
        sent_bytes=sent,
        retransmits=retrans,
        mean_rtt_us=tuple(mean_rtt),
        min_rtt_us=tuple(min_rtt),
        mss_bytes=_mss(start, file),
        congestion=_optional_text(end, "sender_tcp_congestion", "end", file, None),
    )
