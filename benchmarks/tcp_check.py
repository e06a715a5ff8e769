"""The TCP path model (pdd_plan/latency/line/tcp.py) against the CSV's WAN/TCP rows.

Usage: ``python -m benchmarks.tcp_check``. Each check in ``benchmarks/data/tcp_checks.yaml`` is
a line profile built from what its source states (line rate, RTT, window, streams), with the
bundled profiles' defaults where it states nothing; the prediction is k streams of one
connection's rate (``tcp.flow_rate_bytes_s``), capped by the line's goodput, as a striped
transfer runs. A second table puts the CSV's KV-transfer rows (``kv_transfer_checks.yaml``)
beside ``transfer.rdma_transfer_s``. The error is predicted / measured - 1 (+: optimistic).
Nothing is fitted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency.line import tcp, transfer

DATA = Path(__file__).resolve().parent / "data" / "tcp_checks.yaml"
KV_DATA = DATA.with_name("kv_transfer_checks.yaml")
DEFAULTS = {"cost_per_month": 1.0, "loss_rate": 1.2e-8, "max_window_bytes": 4194304}
FIELDS = ("line_gbps", "rtt_ms", "max_window_bytes", "per_connection_gbps")


def line_of(check: dict) -> LineSKU:
    """The line profile a check describes (the bundled defaults elsewhere)."""
    kw = {**DEFAULTS, "name": f"row-{check['row']}", "gbps": check["line_gbps"]}
    kw.update({k: check[k] for k in FIELDS[1:] if check.get(k) is not None})
    kw["connections"] = kw["streams_per_transfer"] = int(check["streams"])
    return LineSKU(**kw)


def predicted_mbps(check: dict) -> float:
    """k streams of one connection's payload rate, at most the line's goodput, in Mb/s."""
    sku = line_of(check)
    rate = min(sku.streams_per_transfer * tcp.flow_rate_bytes_s(sku), sku.bytes_per_s)
    return rate * 8 / 1e6


def limit_of(check: dict) -> str:
    """Which limit sets one connection's rate: line, window or loss (or the stated flow)."""
    sku = line_of(check)
    if sku.per_connection_gbps is not None:
        return "stated flow"
    parts = {
        "line": sku.bytes_per_s,
        "window": tcp.window_limit_bytes_s(sku),
        "loss": tcp.mathis_bytes_s(sku),
    }
    return min(parts, key=parts.get)


def rows() -> list[dict]:
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    out = []
    for c in data["checks"]:
        p = predicted_mbps(c)
        out.append({**c, "predicted_mbps": p, "error": p / c["measured_mbps"] - 1.0})
    return out


def transfer_rows() -> list[dict]:
    """The KV-transfer rows: rdma_transfer_s's effective bandwidth beside the measured one."""
    data = yaml.safe_load(KV_DATA.read_text(encoding="utf-8"))
    out = []
    for c in data["checks"]:
        size = (c["size_gb"] or 1000.0) * 1e9  # unstated: a long run, latency negligible
        t = transfer.rdma_transfer_s(
            size, c["nics"], c["nic_gbps"], data["comm_efficiency"], data["latency_ms"] / 1e3
        )
        pred = size / float(t) / 1e9
        out.append({**c, "predicted_gbytes_s": pred, "error": pred / c["measured_gbytes_s"] - 1})
    return out


def main() -> int:
    print("| row | path | streams | limit | predicted Mb/s | measured Mb/s | error | inputs |")
    print("|---:|---|---:|---|---:|---:|---:|---|")
    for r in rows():
        print(
            f"| {r['row']} | {r['path']} | {r['streams']} | {limit_of(r)} | "
            f"{r['predicted_mbps']:,.3g} | {r['measured_mbps']:,.3g} | {r['error']:+.0%} | "
            f"{' '.join(str(r['inputs']).split())} |"
        )
    print("\n| row | path | NICs x Gb/s | size GB | predicted GB/s | measured GB/s | error |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for r in transfer_rows():
        size = "long run" if r["size_gb"] is None else f"{r['size_gb']:g}"
        print(
            f"| {r['row']} | {r['path']} | {r['nics']} x {r['nic_gbps']} | {size} | "
            f"{r['predicted_gbytes_s']:,.1f} | {r['measured_gbytes_s']:,.1f} | {r['error']:+.0%} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
