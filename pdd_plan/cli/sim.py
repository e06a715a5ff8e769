"""`pdd-plan simulate`: replay a trace or the scenario's workload on a plan and measure it."""

from __future__ import annotations

import dataclasses
import io
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from pdd_plan.architectures import PATHS
from pdd_plan.cli.common import check_format, console, dumps, echo, guarded, loading
from pdd_plan.common import limits
from pdd_plan.common.atomic import check_output, note_input, write_atomic
from pdd_plan.common.errors import InfeasibleError, InputError
from pdd_plan.common.files import require_file

if TYPE_CHECKING:  # the plan schema (pydantic) loads when a command runs, not for --help
    from rich.console import Console

    from pdd_plan.inputs.schema.plan import ArchitecturePlan

_SHOW_AFTER_S = 2.0


class LazyProgress:
    """A rich progress bar on stderr that appears only once a run has taken ~2 s, and only on a
    terminal. Called as ``progress(stage, done, total)`` by the simulator."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self.bar = None
        self.tasks: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.t0 < _SHOW_AFTER_S:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("simulate {task.description:8}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                console=console(stderr=True),
                transient=True,
            )
            self.bar.start()
        if stage not in self.tasks:
            for tid in self.tasks.values():  # earlier stages are done
                self.bar.update(tid, completed=self.bar.tasks[tid].total)
            self.tasks[stage] = self.bar.add_task(stage, total=max(total, 1))
        self.bar.update(self.tasks[stage], completed=done, total=max(total, 1))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


MAX_RATE_RPS = 1e6  # as workload.rate_rps


def _load(path: str, trace: str | None):
    """(context, Plan) from a plan file (optimize --out) or a scenario (optimized here)."""
    from pdd_plan.inputs.context import build_context
    from pdd_plan.inputs.schema import Scenario
    from pdd_plan.inputs.schema.io import parse, read_yaml
    from pdd_plan.inputs.schema.plan import parse_plan

    data = read_yaml(path)
    if isinstance(data, dict) and "plans" in data and "inputs" in data:
        plan = parse_plan(data, path)
        return build_context(plan.inputs, path), plan
    sc = parse(Scenario, data, path)
    if trace is not None:
        d = sc.model_dump(mode="json")
        d["workload"]["trace"] = str(Path(trace).resolve())
        sc = parse(Scenario, d, path)
    from pdd_plan.optimize import optimize

    ctx = build_context(sc, path)
    try:
        return ctx, optimize(ctx)
    except InfeasibleError as e:  # no architecture has a plan: simulate may lift the line cap
        return ctx, e


def _check_trace(trace: str | None, rate: float | None) -> None:
    """--trace names a file; --rate rescales a --trace, to a positive rate."""
    if trace is not None:
        require_file(trace, "check the --trace path", what="trace file")
    if rate is not None and (trace is None or not 0 < rate <= MAX_RATE_RPS):
        fix = "give --trace with it" if trace is None else f"give a rate in (0, {MAX_RATE_RPS:g}]"
        raise InputError(None, "--rate", f"rescales a --trace (got {rate:g})", fix)


MIN_REQUESTS = 100


def _check_counts(requests: int | None, window: int) -> None:
    for flag, n in (("--requests", requests), ("--window", window)):
        if n is None:
            continue
        if n < MIN_REQUESTS:  # as evaluate --requests and optimize --sim-requests
            raise InputError(
                None,
                flag,
                f"must be at least {MIN_REQUESTS} (got {n}): fewer give no P99 worth reading "
                "(a P99 needs misses to see) and no steady load",
                "use a few thousand",
            )
        limits.check("REQUESTS", n, None, flag)


def _lifted(ctx, plan, architecture: str) -> tuple[ArchitecturePlan, str]:
    """The architecture's plan with the line cap lifted, or the planner's own error (a plan
    file, or an architecture the line was not the problem for)."""
    from pdd_plan.optimize import infeasible_of
    from pdd_plan.optimize.lifted import line_cap_lifted

    why = (
        infeasible_of(plan).message
        if isinstance(plan, InfeasibleError)
        else plan.infeasible[architecture].message
    )
    try:
        p = line_cap_lifted(ctx, architecture)
    except InfeasibleError:
        if isinstance(plan, InfeasibleError):
            raise plan from None
        plan.arch(architecture)  # the planner's one-line reason
        raise
    return p, f"no plan under the planner's caps ({why}); replayed with the line cap lifted"


def _fleet_rows(plan: ArchitecturePlan) -> list[dict]:
    keys = ("role", "gpu", "datacenter", "count", "gpus_per_instance")
    return [g.model_dump(include=set(keys)) for g in plan.instances]


@guarded
def simulate_cmd(
    file: str = typer.Argument(
        None,
        help="Scenario YAML (optimized first) or plan YAML from `pdd-plan optimize --out` "
        "(default: the bundled examples/pdd-paper.yaml; or a bundled example's name, e.g. narrow-line).",
    ),
    architecture: str = typer.Option("pdd", "--architecture", "-a", help="pdd | cdc_pd | idc_pd"),
    trace: str = typer.Option(
        None, "--trace", help="Replay this trace (Mooncake/Azure/generic) instead of the workload."
    ),
    requests: int = typer.Option(
        None,
        "--requests",
        "-n",
        help="Requests to replay (default: 20,000 sampled, or the whole trace).",
    ),
    seed: int = typer.Option(None, "--seed", help="Random seed (default: the scenario's)."),
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
    records: Path = typer.Option(
        None,
        "--records",
        help="Write one row per request here (CSV; .parquet needs pdd-plan[parquet]).",
    ),
    rate: float = typer.Option(
        None,
        "--rate",
        help="With --trace: rescale its arrivals to this mean rate, req/s (default: the trace "
        "replayed as recorded).",
    ),
    window: int = typer.Option(
        20_000,
        "--window",
        help="Requests an over-capacity (unstable) line is replayed over: its waits grow "
        "with the replay, so its figures are those of this window.",
    ),
) -> None:
    """Replay the workload (or --trace) on a plan: TTFT/TPOT/KV-transfer percentiles, line use,
    path shares and SLA goodput, measured request by request."""
    with loading():
        from pdd_plan.sim.run import replay_plan
        from pdd_plan.sim.setup import spec

    fmt = check_format(format)
    spec(architecture)  # one-line error naming architectures.names()
    _check_counts(requests, window)
    if seed is not None and not 0 <= seed < 2**64:  # numpy's generators take these only
        raise InputError(None, "--seed", f"must be in [0, 2**64) (got {seed})", "e.g. --seed 0")
    _check_trace(trace, rate)
    parquet = records is not None and records.suffix.lower() == ".parquet"
    if records is not None:
        if not records.parent.exists():
            raise InputError(
                str(records), None, "folder does not exist", "create the folder or change the path"
            )
        if parquet:
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise InputError(
                    str(records),
                    None,
                    "Parquet needs pyarrow",
                    "pip install 'pdd-plan[parquet]' (pyarrow), or use a .csv name",
                ) from None
    from pdd_plan.inputs import profiles
    from pdd_plan.inputs.plan_fit import check_sites

    path = profiles.scenario_path(file)
    ctx, plan = _load(path, trace)
    note = None
    if isinstance(plan, InfeasibleError) or architecture in plan.infeasible:
        # the planner's line cap is a rule, not physics: replay with the cap lifted
        p, note = _lifted(ctx, plan, architecture)
    else:
        p = plan.arch(architecture)  # fail before simulating if the plan lacks it
    if note is None:
        check_sites(plan, ctx.sites, architecture, path)  # ... or is not the scenario's
    note_input(trace)  # --records must not replace the trace, checked before the replay
    if records is not None:
        check_output(records, "--records")
    prog = LazyProgress(enabled=fmt == "table" and sys.stderr.isatty())
    rs = ctx.replay_setup
    if trace is not None:  # as recorded, unless --rate rescales it (the scenario's rate does not)
        rs = dataclasses.replace(rs, workload=rs.workload.model_copy(update={"rate_rps": rate}))
    try:
        res = replay_plan(rs, p, architecture, requests, seed, trace, progress=prog, window=window)
    finally:
        prog.close()
    s = res.summary()
    out = {
        "scenario": ctx.scenario.name,
        **s,
        "arrivals": None
        if trace is None
        else ("as recorded" if rate is None else f"rescaled to {rate:g} req/s (--rate)"),
        "fleet": _fleet_rows(p),
        "line": {"sku": p.line.sku, "count": p.line.count} if p.line is not None else None,
        "sla": ctx.scenario.sla.model_dump(),
    }
    if note is not None:
        out["plan_note"] = note
    if records is not None:
        df = res.records()
        if parquet:
            buf = io.BytesIO()
            df.to_parquet(buf, index=False)
            write_atomic(records, buf.getvalue())
        else:
            write_atomic(records, df.to_csv(index=False, float_format="%.9g"))
    if fmt != "table":
        echo(dumps(out, fmt))
        return
    _render(out, console(), p.goodput_rps)


def _f(x, scale: float = 1.0, nd: int = 3) -> str:
    return "-" if x is None else f"{x * scale:.{nd}f}"


def _quantile_rows(s: dict) -> list[tuple[str, dict]]:
    rows = [
        ("TTFT s", s["ttft_s"]),
        ("TPOT ms", s["tpot_ms"]),
        ("end-to-end s", s["e2e_s"]),
        ("KV transfer s", s["kv_transfer_s"]),
    ]
    cp = s.get("connection_pool")
    if cp is not None:  # KV transfer = pool wait + transfer after the wait
        rows += [("  pool wait s", cp["wait_s"]), ("  after wait s", cp["transfer_s"])]
    return rows + [("prefill wait s", s["prefill_wait_s"]), ("decode wait s", s["decode_wait_s"])]


def _line_lines(s: dict) -> list[str]:
    cp, st = s["connection_pool"], s["stability"]
    out = [
        f"line {s['line']['count']} x {s['line']['sku']}: {s['line_utilization'] * 100:.1f}% "
        f"utilized; connections {cp['mean_in_use']:.1f} of {cp['size']} in use on average "
        f"({cp['streams_per_transfer']} per transfer), "
        f"pool full {cp['full_time_share'] * 100:.1f}% of the time, pool utilization "
        f"{_f(cp['utilization'], 100, 1)}%",
        f"offered {st['offered_gbps']:.3g} Gb/s of {st['capacity_gbps']:.3g} Gb/s the line and "
        f"its pool carry: "
        + (
            f"UNSTABLE, figures are those of this {st['window_requests']:,}-request window "
            f"({st['window_s']:.4g} s)"
            if st["unstable"]
            else "stable"
        ),
    ]
    if s.get("plan_note"):
        out.append(s["plan_note"])
    return out


def _warmup_line(w: dict) -> str:
    """Which requests the figures are over (the replay's warm-up left out)."""
    if w["requests"]:
        return (
            f"warm-up: first {w['requests']:,} requests left out ({w['method']}); "
            f"figures over the other {w['kept_requests']:,}"
        )
    return f"warm-up: none left out ({w['method']}: {w['note'] or 'no transient found'})"


def rate_text(planned: float | None, offered: float | None) -> str:
    """The rate a replay ran at: the plan's (what was asked), and the arrivals' own rate in
    the replay to 3 figures (a sample of Poisson arrivals: 15.2 for a 15 req/s plan, not
    '15.2006', which reads as the plan's)."""
    if planned and offered:
        return f" at {planned:g} req/s (arrivals in the replay: {offered:.3g} req/s)"
    if offered:
        return f" at {offered:.3g} req/s"
    return f" at {planned:g} req/s" if planned else ""


def _render(s: dict, c: Console, planned: float | None = None) -> None:
    from pdd_plan.report import fit  # rich's tables: loaded when one is printed

    title = (
        f"simulate {s['scenario']} / {s['architecture']}: {s['requests']:,} requests"
        + rate_text(planned, s.get("offered_rps"))
        + f" ({Path(s['workload']).name if s['workload'] != 'distribution' else 'sampled workload'})"
    )
    rows = [
        [name, *(_f(q[k]) for k in ("p50", "p90", "p99", "mean"))] for name, q in _quantile_rows(s)
    ]
    fit.show(c, title, ("metric", "p50", "p90", "p99", "mean"), rows, stack_by=None)
    sla = s["sla"]
    r = s["route_share"]
    lines = [
        f"paths {' / '.join(PATHS)}: {' / '.join(f'{r[k] * 100:.1f}%' for k in PATHS)};  "
        f"RLD share of output tokens {s['rld_token_share'] * 100:.1f}%",
    ]
    if s.get("line_utilization") is not None:
        lines += _line_lines(s)
    lines.append(_warmup_line(s["warmup"]))
    lines.append(
        f"SLA goodput {_f(s['goodput_rps'], nd=2)} req/s ({s['sla_attainment'] * 100:.1f}% of "
        f"requests with TTFT <= {sla['ttft_p99_s']:g} s and TPOT <= {sla['tpot_ms']:g} ms)"
    )
    if s.get("arrivals"):
        lines.append(f"trace arrivals: {s['arrivals']}")
    for ln in lines:
        c.print(ln)
    for pool in s.get("overloaded") or []:
        c.print(f"[yellow]OVERLOADED: {pool}[/yellow]")


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
