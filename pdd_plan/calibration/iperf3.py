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

import math

import yaml
from pydantic import ValidationError

from pdd_plan.calibration.iperf3_read import Iperf3Run, read_iperf3  # noqa: F401  (re-exported)
from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema.io import validation_to_input_error
from pdd_plan.inputs.schema.line import LineSKU

FIX = "check the iperf3 files and the options"


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
        if rtt_min is not None and rtt_ms < rtt_min:
            raise InputError(
                None,
                "rtt_ms",
                f"{rtt_ms:g} ms is below the measured minimum RTT of {rtt_min:g} ms (the "
                "senders' min_rtt: no packet crossed the path faster)",
                f"give at least {rtt_min:g}, or leave it out to use the measured mean",
            )
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
    fields = dict(
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
    try:  # the readers bound each figure; this catches a combination the schema refuses
        return LineSKU.model_validate(fields)
    except ValidationError as e:
        raise validation_to_input_error(LineSKU, e, ", ".join(r.file for r in runs), FIX) from None


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
