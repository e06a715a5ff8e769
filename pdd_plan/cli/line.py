"""`pdd-plan line calibrate`: a line profile from iperf3 measurements."""

from __future__ import annotations

from pathlib import Path

import typer

from pdd_plan.cli.common import PLAIN_HELP, echo, flag_names, guarded, write_atomic
from pdd_plan.common.atomic import check_output

line_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=PLAIN_HELP,
    help="Leased-line profiles from measurements.",
)

# the profile fields the options set, for errors that name a field
FLAGS = {
    "iperf3": "--iperf3",
    "name": "--name",
    "gbps": "--gbps",
    "cost_per_month": "--cost-per-month",
    "rtt_ms": "--rtt-ms",
}


@line_app.command("calibrate")
@guarded
def calibrate_cmd(
    iperf3: list[str] = typer.Option(
        None,
        "--iperf3",
        help="JSON written by `iperf3 -c HOST -J` (TCP; -P N and -R allowed). Repeat for several "
        "runs of the same path: per-connection throughput comes from -P 1 runs, the aggregate "
        "from the run with the most streams, the RTT from runs without -R.",
    ),
    name: str = typer.Option("measured-line", "--name", help="Profile name."),
    cost_per_month: float = typer.Option(
        None, "--cost-per-month", help="The line's price, USD per month (required)."
    ),
    gbps: float = typer.Option(
        None, "--gbps", help="Line rate, Gb/s (default: the highest measured goodput)."
    ),
    rtt_ms: float = typer.Option(
        None, "--rtt-ms", help="Path RTT, ms (default: the senders' mean_rtt of runs without -R)."
    ),
    out: Path = typer.Option(None, "--out", "-o", help="Write the YAML here (default: stdout)."),
) -> None:
    """Write a line profile (the YAML of profiles/lines/) from iperf3 JSON: per-connection and
    aggregate goodput, RTT, retransmit rate, MSS, with each number's derivation in `source`."""
    from pdd_plan.calibration.iperf3 import calibrate, read_iperf3, to_yaml

    with flag_names(**FLAGS):
        runs = [read_iperf3(f) for f in iperf3 or []]
    if out is not None:  # every --iperf3 file is an input now: refused as --out before work
        check_output(out, "--out")
    with flag_names(**FLAGS):
        sku = calibrate(runs, name, cost_per_month, gbps=gbps, rtt_ms=rtt_ms)
    text = to_yaml(sku)
    if out is None:
        echo(text)
    else:
        write_atomic(out, text)
        echo(f"wrote {out}\n")


def register(app: typer.Typer) -> None:
    app.add_typer(line_app, name="line")
