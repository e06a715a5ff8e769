"""Workload commands: `trace stats` and `bathtub`."""

from __future__ import annotations

from pathlib import Path

import typer

from pdd_plan.cli.common import (
    PLAIN_HELP,
    check_format,
    console,
    dumps,
    echo,
    guarded,
    write_atomic,
)
from pdd_plan.cli.progress import Stages, wanted
from pdd_plan.common import limits
from pdd_plan.common.errors import InputError
from pdd_plan.common.files import require_file

trace_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=PLAIN_HELP,
    help="Request traces: statistics and prefix-cache hit rates.",
)


@trace_app.command("stats")
@guarded
def stats(
    file: str = typer.Argument(..., help="Trace: Mooncake JSONL, Azure CSV, or generic CSV/JSONL."),
    cache_tokens: int = typer.Option(
        None, "--cache-tokens", help="Prefix-cache capacity in tokens (default: infinite)."
    ),
    skip_bad_rows: bool = typer.Option(
        False, "--skip-bad-rows", help="Skip and count malformed rows instead of failing."
    ),
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
) -> None:
    """Lengths, arrival rate and the prefix-hit histogram of a trace."""
    from pdd_plan.workload.cache import CacheSpec
    from pdd_plan.workload.stats import trace_stats
    from pdd_plan.workload.traces import read_trace

    fmt = check_format(format)
    if cache_tokens is not None and cache_tokens < 512:
        raise InputError(
            None,
            "--cache-tokens",
            f"must be at least one 512-token block (got {cache_tokens})",
            "give a larger capacity or omit it",
        )
    require_file(file, "check the path", what="trace file")
    spec = CacheSpec.from_tokens(cache_tokens, cache_tokens) if cache_tokens else None
    with Stages("trace stats", wanted(fmt)) as bar:
        bar.stage("reading the trace and its prefix cache")
        req, info = read_trace(file, skip_bad_rows=skip_bad_rows, cache=spec)
        bar.stage("statistics")
        s = trace_stats(req)
    s["file"] = file
    s["bad_rows_skipped"] = int(getattr(info, "bad_rows", 0))
    if fmt != "table":
        echo(dumps(s, fmt))
        return
    from rich.table import Table  # rich loads when a table is printed

    c = console()
    # the file on a line of its own, never wrapped (a path cut mid-name reads as two), and the
    # table's title short enough not to wrap at 80 columns
    c.print(f"trace: {file}", markup=False, highlight=False, soft_wrap=True)
    t = Table(
        title=f"{s['requests']:,} requests over {s['duration_s']:,.0f} s ({s['rate_rps']} req/s)"
    )
    for col in ("tokens", "p50", "p90", "p99", "mean"):
        t.add_column(col)
    for k in ("input_tokens", "output_tokens"):
        d = s[k]
        t.add_row(k.split("_")[0], *(f"{d[q]:,.0f}" for q in ("p50", "p90", "p99", "mean")))
    c.print(t)
    if s["hit_rate_bins"] is None:
        c.print("prefix hit rates: unknown (the trace has no block hashes)")
        return
    h = Table(title=f"prefix hit rate (token-weighted {s['token_weighted_hit_rate'] * 100:.1f}%)")
    h.add_column("hit rate")
    h.add_column("requests")
    for b in s["hit_rate_bins"]:
        h.add_row(f"{b['lo'] * 100:g}-{b['hi'] * 100:g}%", f"{b['share'] * 100:.1f}%")
    c.print(h)


@guarded
def bathtub_cmd(
    model: str = typer.Option(..., "--model", help="Model profile name or YAML path."),
    gpu: str = typer.Option(..., "--gpu", help="GPU profile name or YAML path."),
    input_tokens: int = typer.Option(
        ..., "--input-tokens", help="Input length L of every request."
    ),
    chunk: int = typer.Option(8192, "--chunk", help="Chunked-prefill size in tokens."),
    hit_price_ratio: float = typer.Option(
        0.1, "--hit-price-ratio", help="Price of a cached token / an uncached one."
    ),
    gpus: int = typer.Option(
        None, "--gpus", help="GPUs per instance (default: the smallest that fits)."
    ),
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
    plot: Path = typer.Option(None, "--plot", help="Write a PNG of the curves here."),
) -> None:
    """Per-instance miss/hit token throughput and revenue against prefix hit rate; the valley."""
    from pdd_plan.perf.bathtub import bathtub, prefill_passes
    from pdd_plan.perf.instance import parallelism_candidates

    fmt = check_format(format)
    if input_tokens < 1:
        raise InputError(
            None, "--input-tokens", f"must be >= 1 (got {input_tokens})", "give a positive length"
        )
    if chunk < 1:
        raise InputError(
            None, "--chunk", f"must be >= 1 (got {chunk})", "give a positive chunk size"
        )
    if not 0 <= hit_price_ratio <= 1:
        raise InputError(
            None,
            "--hit-price-ratio",
            f"must be in [0, 1] (got {hit_price_ratio})",
            "cached tokens are billed at 0.1-0.25 of uncached ones",
        )
    limits.check("TOKENS", input_tokens, None, "--input-tokens")
    passes = prefill_passes(input_tokens, chunk)
    # passes scale as 1 / chunk: the chunk that brings them under the limit, rounded up
    need = -(-chunk * passes // limits.value("PREFILL_PASSES"))
    limits.check("PREFILL_PASSES", passes, None, "--chunk", f"use --chunk >= {need:,}")
    from pdd_plan.inputs import profiles

    m, g = profiles.model(model, "--model"), profiles.gpu(gpu, "--gpu")
    cands = [
        i
        for i in parallelism_candidates(m, g, 64, extra_sizes=3)
        if gpus is None or i.n_gpus == gpus
    ]
    if not cands:
        raise InputError(
            None,
            "--gpus",
            f"{m.name} does not fit on {gpus or 'up to 64'} x {g.name}",
            "use more GPUs or a larger-memory GPU",
        )
    inst = cands[0]
    res = bathtub(inst, input_tokens, chunk, hit_price_ratio)
    res = {
        "model": m.name,
        "gpu": g.name,
        "instance": inst.label,
        "input_tokens": input_tokens,
        "chunk": chunk,
        "hit_price_ratio": hit_price_ratio,
        **res,
    }
    if plot is not None:
        from pdd_plan.report.plots import bathtub_png

        write_atomic(plot, bathtub_png(res))
    if fmt != "table":
        echo(dumps(res, fmt))
        return
    from rich.table import Table  # rich loads when a table is printed

    c = console()
    t = Table(
        title=f"bathtub: {m.name} on {inst.label}, {input_tokens:,}-token inputs, chunk {chunk}, hit price x{hit_price_ratio:g}"
    )
    for col in ("hit rate", "miss tok/s", "hit tok/s", "revenue/s (uncached-token units)"):
        t.add_column(col)
    v = res["valley"]
    for i in table_rows(res):
        p = res["points"][i]
        mark = "  valley" if p["hit_rate"] == v["hit_rate"] else ""
        t.add_row(
            f"{p['hit_rate'] * 100:.0f}%",
            f"{p['miss_tokens_per_s']:,.0f}",
            f"{p['hit_tokens_per_s']:,.0f}",
            f"{p['revenue_per_s']:,.0f}{mark}",
        )
    c.print(t)
    c.print(
        f"valley at {v['hit_rate'] * 100:.0f}% hit: revenue {v['revenue_drop'] * 100:.1f}% below hit rate 0"
    )


def table_rows(res: dict, every: int = 5) -> list[int]:
    """The bathtub points the table shows: every `every`-th, the last (the curve's end) and
    the valley the line below it names, in order."""
    pts = res["points"]
    keep = set(range(0, len(pts), every)) | {len(pts) - 1}
    keep |= {i for i, p in enumerate(pts) if p["hit_rate"] == res["valley"]["hit_rate"]}
    return sorted(keep)


def register(app: typer.Typer) -> None:
    app.add_typer(trace_app, name="trace")
    app.command("bathtub")(bathtub_cmd)
