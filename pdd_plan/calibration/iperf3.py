"""Line profiles from measurements: read `iperf3 -J` output and derive a LineSKU.

What iperf3 (3.x, TCP) reports and what each profile field is made of:

- goodput: the *receiver*'s bytes over its seconds (``end.streams[].receiver``,
  ``end.sum_received``), i.e. what arrived, net of headers and retransmissions.
- ``per_connection_gbps``: receiver goodput of the single-stream runs (``-P 1``), mean over
  such files. With only parallel runs: the aggregate / N, one stream's fair share, which is a
  lower bound on one flow's ceiling (the source says so).
- ``measured_aggregate_gbps`` / ``measured_aggregate_connections``: ``end.sum_received`` of
  the runs with the most streams (mean over such files) and that stream count.
- ``rtt_ms``: the sender's ``mean_rtt`` (microseconds; iperf3 averages the kernel's smoothed
  RTT, tcp_info.tcpi_rtt, over its interval samples) averaged over the streams of the
  non-reversed runs with the fewest streams (the least self-inflicted queueing). With ``-R`` the
  client is the receiver and reports 0, so reversed runs give no RTT; then it must be given.
- ``rtt_min_ms``: the smallest sender ``min_rtt`` over non-reversed streams.
- ``retransmit_rate``: sum of ``retransmits`` / sum of (sender bytes / MSS) over all runs. iperf3
  counts retransmitted segments (tcpi_total_retrans) but not segments sent; bytes / MSS is the
  number of full-size segments, so this is an upper bound on the per-segment rate (bulk
  transfers send full segments) and an estimate of the loss rate a Mathis-style model wants
  (a spurious retransmit is not a loss; a loss is always retransmitted).
- ``mss_bytes``: ``start.tcp_mss`` (set with ``-M``) else ``start.tcp_mss_default`` (the MSS
  the kernel gave the control connection); the smallest when files differ.
- ``tcp_congestion``: ``end.sender_tcp_congestion``.
- ``gbps`` (the line rate) is not measurable: when not given, the highest goodput of any run
  is used with ``tcp_efficiency`` 1 (it already is goodput); when given, ``tcp_efficiency``
  keeps its default and a measured goodput above the line rate is an error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema.line import LineSKU

KEYS = ("start", "end")  # what every iperf3 -J document has, even an error report
FIX_RECORD = "give the JSON that `iperf3 -c HOST -J` wrote (TCP)"


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
    p = Path(path)
    if not p.is_file():
        raise InputError(path, None, "file not found", "check the path")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, None, f"cannot read: {e}", FIX_RECORD) from None
    if not text.strip():
        raise InputError(path, None, "empty file", FIX_RECORD)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        # a parse error at the very end of the text: iperf3 was killed mid-write
        if e.pos >= len(text.rstrip()):
            raise InputError(
                path, None, "truncated JSON (the file ends mid-document)", FIX_RECORD
            ) from None
        raise InputError(
            path, None, f"not JSON (line {e.lineno}, column {e.colno}: {e.msg})", FIX_RECORD
        ) from None


def _field(data: Any, path: str, file: str, kind: type | tuple[type, ...]) -> Any:
    """``data[a][b]...`` for a dotted ``path``, of type ``kind``, else a one-line error."""
    cur = data
    for key in path.split("."):
        if not isinstance(cur, dict) or key not in cur:
            raise InputError(file, path, "missing from the iperf3 output", FIX_RECORD)
        cur = cur[key]
    if isinstance(cur, bool) or not isinstance(cur, kind):
        raise InputError(file, path, f"unexpected value {cur!r}", FIX_RECORD)
    return cur


def _check_kind(data: Any, file: str) -> None:
    if isinstance(data, dict) and "error" in data:
        raise InputError(
            file, None, f"iperf3 reported an error: {data['error']}", "rerun the measurement"
        )
    if not isinstance(data, dict) or not all(isinstance(data.get(k), dict) for k in KEYS):
        raise InputError(
            file, None, "not iperf3 output (no 'start' / 'end' keys)", "give `iperf3 -J` output"
        )
    protocol = (data["start"].get("test_start") or {}).get("protocol", "TCP")
    streams = data["end"].get("streams")
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
    sent, retrans, mean_rtt, min_rtt = 0, 0, [], []
    for i, s in enumerate(streams):
        sender = s.get("sender") if isinstance(s, dict) else None
        if not isinstance(sender, dict) or not isinstance(sender.get("bytes"), int):
            raise InputError(file, f"end.streams[{i}].sender.bytes", "missing", FIX_RECORD)
        sent += sender["bytes"]
        r = sender.get("retransmits")
        retrans = None if retrans is None or not isinstance(r, int) or r < 0 else retrans + r
        if sender.get("mean_rtt"):  # 0 or absent: not measured here (the -R client)
            mean_rtt.append(float(sender["mean_rtt"]))
        if sender.get("min_rtt"):
            min_rtt.append(float(sender["min_rtt"]))
    return sent, retrans, mean_rtt, min_rtt


def read_iperf3(file: str) -> Iperf3Run:
    """Parse one `iperf3 -J` file; one-line InputErrors for anything else."""
    data = _load_json(file)
    _check_kind(data, file)
    test = _field(data, "start.test_start", file, dict)
    streams = _field(data, "end.streams", file, list)
    n = _field(data, "start.test_start.num_streams", file, int)
    if len(streams) != n:  # --bidir runs list both directions
        raise InputError(
            file,
            "end.streams",
            f"{len(streams)} streams for num_streams {n} (a --bidir run?)",
            "record one direction at a time (-R for the reverse)",
        )
    received = _field(data, "end.sum_received", file, dict)
    bps = _field(data, "end.sum_received.bits_per_second", file, (int, float))
    if bps <= 0:
        raise InputError(file, "end.sum_received.bits_per_second", "no data arrived", FIX_RECORD)
    sent, retrans, mean_rtt, min_rtt = _stream_stats(streams, file)
    start = data["start"]
    mss = start.get("tcp_mss") or start.get("tcp_mss_default")
    return Iperf3Run(
        file=file,
        name=Path(file).name,
        version=str(start.get("version", "iperf3 (version not reported)")),
        time=str((start.get("timestamp") or {}).get("time", "time not reported")),
        host=str((start.get("connecting_to") or {}).get("host", "?")),
        streams=n,
        reverse=bool(test.get("reverse", 0)),
        seconds=float(received.get("seconds", 0.0)),
        goodput_gbps=bps / 1e9,
        sent_bytes=sent,
        retransmits=retrans,
        mean_rtt_us=tuple(mean_rtt),
        min_rtt_us=tuple(min_rtt),
        mss_bytes=int(mss) if isinstance(mss, int) and mss > 0 else None,
        congestion=data["end"].get("sender_tcp_congestion"),
    )


def _sig(x: float, digits: int = 4) -> float:
    """``x`` to ``digits`` significant figures: profile numbers are measurements, not exact."""
    return 0.0 if x == 0 else float(f"{x:.{digits}g}")


def _names(runs: list[Iperf3Run]) -> str:
    return ", ".join(r.name for r in runs)


def _per_connection(runs: list[Iperf3Run]) -> tuple[float, float, int, str]:
    """per_connection_gbps, aggregate Gb/s, its stream count, and how they were derived."""
    top = max(r.streams for r in runs)
    wide = [r for r in runs if r.streams == top]
    agg = sum(r.goodput_gbps for r in wide) / len(wide)
    why = [
        f"measured_aggregate_gbps {_sig(agg)}: receiver goodput summed over the {top} "
        f"stream(s) of {_names(wide)} (mean over files)."
    ]
    single = [r for r in runs if r.streams == 1]
    if single:
        per = sum(r.goodput_gbps for r in single) / len(single)
        why.append(
            f"per_connection_gbps {_sig(per)}: receiver goodput of the single-stream run(s) "
            f"{_names(single)} (mean over files)."
        )
    else:
        per = agg / top
        why.append(
            f"per_connection_gbps {_sig(per)}: the aggregate / {top}, one stream's fair share; "
            "a lower bound on one flow's ceiling (record a -P 1 run for the real figure)."
        )
    return per, agg, top, " ".join(why)


def _rtt(runs: list[Iperf3Run], rtt_ms: float | None) -> tuple[float, float | None, str]:
    """rtt_ms, rtt_min_ms and how they were derived."""
    forward = [r for r in runs if r.mean_rtt_us]
    mins = [m for r in forward for m in r.min_rtt_us]
    rtt_min = _sig(min(mins) / 1000.0) if mins else None
    why_min = (
        f" rtt_min_ms {rtt_min}: the smallest sender min_rtt of {_names(forward)}." if mins else ""
    )
    if rtt_ms is not None:
        if not math.isfinite(rtt_ms) or rtt_ms < 0:
            raise InputError(None, "rtt_ms", f"must be >= 0 ms (got {rtt_ms})", "give the RTT")
        return rtt_ms, rtt_min, f"rtt_ms {rtt_ms:g}: user input." + why_min
    if not forward:
        raise InputError(
            None,
            "rtt_ms",
            "unknown: reversed (-R) runs report mean_rtt 0 on the client",
            "add a run without -R, or give the path's RTT",
        )
    fewest = min(r.streams for r in forward)
    chosen = [r for r in forward if r.streams == fewest]
    samples = [m for r in chosen for m in r.mean_rtt_us]
    rtt = _sig(sum(samples) / len(samples) / 1000.0)
    why = (
        f"rtt_ms {rtt}: the sender's mean_rtt (iperf3's mean of the kernel's smoothed RTT "
        f"samples, µs / 1000) averaged over the {len(samples)} stream(s) of {_names(chosen)}, "
        "the non-reversed run(s) with the fewest streams."
    )
    return rtt, rtt_min, why + why_min


def _loss(runs: list[Iperf3Run]) -> tuple[float | None, int | None, str]:
    """retransmit_rate, mss_bytes and how they were derived."""
    msss = sorted({r.mss_bytes for r in runs if r.mss_bytes})
    mss = msss[0] if msss else None
    why = f"mss_bytes {mss}: start.tcp_mss or tcp_mss_default" + (
        f" (files differ: {msss}; the smallest)." if len(msss) > 1 else "."
    )
    counted = [r for r in runs if r.retransmits is not None]
    if mss is None or not counted:
        return None, mss, why + " retransmit_rate: not reported (no MSS or no retransmit count)."
    retrans = sum(r.retransmits or 0 for r in counted)
    segments = sum(r.sent_bytes for r in counted) / mss
    rate = _sig(retrans / segments, 3)
    why += (
        f" retransmit_rate {rate}: {retrans} retransmitted segments / {segments:.0f} "
        f"full-size segments sent (bytes sent / mss_bytes) over {_names(counted)}; an upper bound "
        "on the per-segment rate and an estimate of loss."
    )
    return rate, mss, why


def _line_rate(gbps: float | None, best: float) -> tuple[float, float, str]:
    """gbps, tcp_efficiency and how they were derived; ``best``: the highest goodput seen."""
    if gbps is None:
        return (
            _sig(best),
            1.0,
            f"gbps {_sig(best)}: not given, the highest goodput of any run (the most the path "
            "was seen to carry); tcp_efficiency 1: that figure already is goodput (net of "
            "headers and retransmits).",
        )
    if not math.isfinite(gbps) or gbps <= 0:
        raise InputError(None, "gbps", f"must be > 0 Gb/s (got {gbps})", "give the line rate")
    if best > gbps:
        raise InputError(
            None,
            "gbps",
            f"line rate {gbps:g} Gb/s is below the measured goodput {_sig(best)} Gb/s",
            "give the leased line's rate, or omit it to use the highest measured goodput",
        )
    eff = LineSKU.model_fields["tcp_efficiency"].default
    return gbps, eff, f"gbps {gbps:g}: user input (line rate). tcp_efficiency {eff}: the default."


def calibrate(
    runs: list[Iperf3Run],
    name: str,
    cost_per_month: float | None,
    gbps: float | None = None,
    rtt_ms: float | None = None,
) -> LineSKU:
    """A line profile from iperf3 runs of one path; each number's derivation in ``source``."""
    if not runs:
        raise InputError(None, "iperf3", "no iperf3 files", "give at least one `iperf3 -J` file")
    if cost_per_month is None:
        raise InputError(
            None, "cost_per_month", "missing: a line profile needs its price", "give USD/month"
        )
    if not math.isfinite(cost_per_month) or cost_per_month <= 0:
        raise InputError(
            None, "cost_per_month", f"must be > 0 (got {cost_per_month})", "give USD/month"
        )
    if not name.strip():
        raise InputError(None, "name", "empty", "give the profile a name")
    per, agg, top, why_tput = _per_connection(runs)
    line_rate, eff, why_rate = _line_rate(gbps, max(r.goodput_gbps for r in runs))
    rtt, rtt_min, why_rtt = _rtt(runs, rtt_ms)
    rate, mss, why_loss = _loss(runs)
    congestion = sorted({r.congestion for r in runs if r.congestion})
    files = "; ".join(
        f"{r.name} ({r.version}, {r.time}, to {r.host}, {r.streams} stream(s)"
        f"{', reversed -R' if r.reverse else ''}, {r.seconds:.1f} s)"
        for r in runs
    )
    source = " ".join(
        [
            f"Measured with iperf3 -J, calibrated by pdd-plan line calibrate: {files}.",
            why_rate,
            f"cost_per_month {cost_per_month:g}: user input.",
            why_tput,
            why_rtt,
            why_loss,
            f"tcp_congestion: end.sender_tcp_congestion ({', '.join(congestion) or 'not reported'}).",
            "connections: not measured, the default transfer-pool size.",
        ]
    )
    return LineSKU(
        name=name,
        gbps=line_rate,
        cost_per_month=cost_per_month,
        rtt_ms=rtt,
        tcp_efficiency=eff,
        per_connection_gbps=_sig(per),
        measured_aggregate_gbps=_sig(agg),
        measured_aggregate_connections=top,
        rtt_min_ms=rtt_min,
        retransmit_rate=rate,
        mss_bytes=mss,
        tcp_congestion=congestion[0] if len(congestion) == 1 else None,
        source=source,
    )


class _Folded(str):
    """A string YAML writes folded (``>-``), as the bundled profiles write ``source``."""


def _folded(dumper: yaml.SafeDumper, s: _Folded) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(s), style=">")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Folded, _folded)


def to_yaml(sku: LineSKU) -> str:
    """The profile as YAML in the layout of pdd_plan/data/profiles/lines/*.yaml."""
    data = sku.model_dump(mode="json", exclude_none=True)
    data["source"] = _Folded(data["source"])
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=88, allow_unicode=True)
