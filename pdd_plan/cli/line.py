"""`pdd-plan line calibrate`: a line profile from iperf3 measurements."""

from __future__ import annotations

from pathlib import Path

import typer

from pdd_plan.cli.common import PLAIN_HELP, echo, flag_names, guarded, write_atomic
from pdd_plan.common.atomic import check_output
from pdd_plan.common.errors import InputError

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
    "transfers": "--transfers",
    "base": "--base",
}
# the base a --transfers fit keeps its other fields from: a shared inter-city leased line
DEFAULT_BASE = "shared-10g"


@line_app.command("calibrate")
@guarded
def calibrate_cmd(
    transfers: Path = typer.Option(
        None,
        "--transfers",
        help="CSV of measured transfers: bytes,mean_s[,p99_s,max_s,gbps,rtt_ms], one row per "
        "size; mean_s is the time on the line without the sender's GPU copy. Fits the rate one "
        "transfer gets (and the setup, with two sizes or more) and prints each row's fit.",
    ),
    base: str = typer.Option(
        DEFAULT_BASE,
        "--base",
        help="With --transfers: the line profile (name or YAML) whose other fields it keeps.",
    ),
    iperf3: list[str] = typer.Option(
        None,
        "--iperf3",
        help="JSON written by `iperf3 -c HOST -J` (TCP; -P N and -R allowed). Repeat for several "
        "runs of the same path: per-connection throughput comes from -P 1 runs, the aggregate "
        "from the run with the most streams, the RTT from runs without -R.",
    ),
    name: str = typer.Option("measured-line", "--name", help="Profile name."),
    cost_per_month: float = typer.Option(
        None,
        "--cost-per-month",
        help="The line's price, USD per month (required with --iperf3; else the base's).",
    ),
    gbps: float = typer.Option(
        None, "--gbps", help="Line rate, Gb/s (default: the highest measured goodput)."
    ),
    rtt_ms: float = typer.Option(
        None, "--rtt-ms", help="Path RTT, ms (default: the senders' mean_rtt of runs without -R)."
    ),
    out: Path = typer.Option(None, "--out", "-o", help="Write the YAML here (default: stdout)."),
) -> None:
    """Write a line profile (the YAML of profiles/lines/) from iperf3 JSON (per-connection and
    aggregate goodput, RTT, retransmit rate, MSS) or from measured transfers (--transfers),
    with each number's derivation in `source`."""
    from pdd_plan.calibration.iperf3 import calibrate, read_iperf3, to_yaml

    if transfers is not None:
        if iperf3:
            raise InputError(None, "--transfers", "give --transfers or --iperf3, not both", "")
        _from_transfers(transfers, base, name, cost_per_month, gbps, rtt_ms, out)
        return
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


def _from_transfers(
    transfers: Path,
    base: str,
    name: str,
    cost: float | None,
    gbps: float | None,
    rtt_ms: float | None,
    out: Path | None,
) -> None:
    """`--transfers`: the fitted profile (stdout, each row's fit as comments; or --out)."""
    from pdd_plan.calibration.iperf3 import to_yaml
    from pdd_plan.calibration.line_transfers import calibrate_transfers, fit_table, read_transfers
    from pdd_plan.inputs import profiles

    with flag_names(**FLAGS):
        rows = read_transfers(str(transfers))
        sku = profiles.line(base, "--base")
    if out is not None:
        check_output(out, "--out")
    with flag_names(**FLAGS):
        fit = calibrate_transfers(rows, sku, str(transfers), name, gbps, rtt_ms, cost)
    table = fit_table(fit)
    text = to_yaml(fit.sku)
    if out is None:
        echo(text + "".join(f"# {t}\n" for t in table))
    else:
        write_atomic(out, text)
        echo(f"wrote {out}\n" + "".join(f"{t}\n" for t in table))


def register(app: typer.Typer) -> None:
    app.add_typer(line_app, name="line")
