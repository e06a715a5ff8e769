"""`perf --phase serve`: one aggregated instance under a benchmark client's load, as
bench_serving / vllm bench serve report it (perf/serve.py)."""

from __future__ import annotations

import typer

from pdd_plan.common import limits
from pdd_plan.common.errors import InputError

MAX_PROMPTS = 1_000_000
MAX_CONCURRENCY = 100_000
PREFILL_GRAPHS = typer.Option(
    None,
    "--prefill-graphs/--eager-prefill",
    help="serve: steps with prompt tokens replay CUDA graphs (SGLang "
    "--enable-piecewise-cuda-graph, TensorRT-LLM piecewise graphs) or run eager, paying the "
    "host's launches (default: the engine's, engines.yaml).",
)


def serve_only(phase: str, **flags) -> None:
    """A serve-only flag given to another phase is a one-line error, not silently ignored."""
    for name, value in flags.items():
        if value is not None and phase != "serve":
            flag = "--" + name.replace("_", "-")
            raise InputError(None, flag, "only --phase serve takes it", "drop it or use serve")


def check_load(concurrency, rate, num_prompts) -> None:
    if (concurrency is None) == (rate is None):
        raise InputError(
            None,
            "--concurrency",
            "serve needs exactly one of --concurrency (closed loop) and --rate (open loop)",
            "e.g. --concurrency 64",
        )
    if concurrency is not None and not 1 <= concurrency <= MAX_CONCURRENCY:
        raise InputError(None, "--concurrency", f"must be in [1, {MAX_CONCURRENCY:,}]", "e.g. 64")
    if rate is not None and not (0 < rate <= 1e6):
        raise InputError(None, "--rate", "must be in (0, 1e6] requests/s", "e.g. 4")
    if num_prompts is not None and not 1 <= num_prompts <= MAX_PROMPTS:
        raise InputError(None, "--num-prompts", f"must be in [1, {MAX_PROMPTS:,}]", "e.g. 640")


MAX_ROWS = 1_000_000


def dataset_lengths(path: str):
    """A dataset's lengths (`--lengths FILE`): one request per line, `input_tokens,output_tokens`
    (a header line is skipped), as two histograms."""
    import numpy as np

    from pdd_plan.common.files import read_text
    from pdd_plan.perf import serve_lengths as sl

    fix = "give sglang | vllm, or a CSV of input_tokens,output_tokens per request"
    text = read_text(path, fix, "--lengths")
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        cells = [c.strip() for c in line.split(",")]
        if not line.strip() or (n == 1 and not cells[0].isdigit()):
            continue
        if len(cells) != 2 or not all(c.isdigit() and int(c) >= 1 for c in cells):
            raise InputError(
                path, f"line {n}", f"not two whole token counts >= 1: {line[:60]!r}", fix
            )
        rows.append((int(cells[0]), int(cells[1])))
        if len(rows) > MAX_ROWS:
            raise InputError(path, "--lengths", f"over {MAX_ROWS:,} requests", "sample fewer")
    if not rows:
        raise InputError(path, "--lengths", "no requests in it", fix)
    a = np.array(rows, dtype=float)
    for col, flag in ((0, "input_tokens"), (1, "output_tokens")):
        limits.check("TOKENS", float(a[:, col].max()), path, flag)
    out = []
    for col in (0, 1):
        v, c = np.unique(a[:, col], return_counts=True)
        out.append(sl.histogram(v, c, "--lengths"))
    return out[0], out[1]


def serve_result(
    inst,
    engine: str,
    input_tokens: int,
    output_tokens: int | None,
    concurrency: int | None,
    rate: float | None,
    num_prompts: int | None,
    range_ratio: float | None,
    generator: str,
    max_running: int | None = None,
    prefill_graphs: bool | None = None,
) -> dict:
    """The numbers `perf --phase serve` prints, as a plain dict."""
    from pdd_plan.inputs.serving_band import note_for
    from pdd_plan.perf import serve_lengths as sl
    from pdd_plan.perf.serve import Load, serve
    from pdd_plan.perf.serve_engine import serve_engine
    from pdd_plan.perf.serve_step import StepCost

    check_load(concurrency, rate, num_prompts)
    if not output_tokens:
        raise InputError(None, "--output-tokens", "serve needs it", "e.g. --output-tokens 1024")
    limits.check("TOKENS", input_tokens, None, "--input-tokens")
    limits.check("TOKENS", output_tokens, None, "--output-tokens")
    eng = serve_engine(engine, inst.gpu.memory.hbm_gb).with_limits(
        max_running=max_running, prefill_graphs=prefill_graphs
    )
    if generator in ("sglang", "vllm"):
        isl = sl.drawn(input_tokens, range_ratio, generator, "--range-ratio")
        osl = sl.drawn(output_tokens, range_ratio, generator, "--range-ratio")
    else:
        isl, osl = dataset_lengths(generator)
    cost = StepCost(inst, eng)
    r = serve(inst, eng, Load(isl, osl, concurrency, rate, num_prompts), cost)
    s = r.steady
    # how far off the serve phase was on published serving runs held out of the fit
    band, note = note_for(r.in_flight_mean)
    return {
        "phase": "serve",
        "engine": eng.name,
        "schedule": eng.schedule,
        "load": {
            "concurrency": concurrency,
            "rate": rate,
            "num_prompts": num_prompts,
            "input_tokens": {"mean": isl.mean, "low": isl.low, "high": isl.high},
            "output_tokens": {"mean": osl.mean, "low": osl.low, "high": osl.high},
        },
        "throughput_tokens_per_s": r.output_tokens_per_s,
        "total_tokens_per_s": r.total_tokens_per_s,
        "request_throughput": r.requests_per_s,
        "ttft_s": r.ttft_s.as_dict(),
        "tpot_ms": r.tpot_s.as_dict(1e3),
        "itl_ms": r.itl_s.as_dict(1e3),
        "in_flight_mean": r.in_flight_mean,
        "duration_s": r.duration_s,
        "decode_batch_mean": s.batch,
        "running_limit": r.running_limit,
        "bound_by": r.limit,
        "saturated": r.saturated,
        "lockstep_waves": r.waves,
        "ramp_s": r.ramp_s,
        "drain_s": r.drain_s,
        "step_s": {"decode": s.t_decode_s, "prompt_extra": s.t_prompt_s},
        "prompt_steps_per_decode_step": s.prompt_share,
        "step_tokens": eng.step_tokens,
        # the host's launching of an eager pass: the least a step with prompt tokens takes
        "eager_prompt_step_s": cost.eager_pass_s,
        "engine_source": eng.source,
        "mode": inst.mode,
        "error_band": band,
        "error_band_note": note,
    }


def render(res: dict, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, show_header=True)
    t.add_column("quantity")
    t.add_column("value", justify="right", overflow="fold")
    ld = res["load"]
    loop = (
        f"closed loop, concurrency {ld['concurrency']}"
        if ld["concurrency"]
        else (f"open loop, {ld['rate']:g} requests/s")
    )
    t.add_row("load", f"{loop}; {ld['num_prompts'] or 'endless'} prompts")
    for k in ("input_tokens", "output_tokens"):
        d = ld[k]
        t.add_row(k.replace("_", " "), f"mean {d['mean']:.0f} [{d['low']:.0f}, {d['high']:.0f}]")
    eager = res["eager_prompt_step_s"]
    steps = f"prompt steps eager, >= {eager * 1e3:.1f} ms" if eager else "prompt steps graphed"
    t.add_row("engine", f"{res['engine']} ({res['schedule']} prefill; {steps})")
    t.add_row("output tokens/s", f"{res['throughput_tokens_per_s']:,.0f}")
    t.add_row("total tokens/s", f"{res['total_tokens_per_s']:,.0f}")
    for k, unit, scale in (("ttft_s", "ms", 1e3), ("tpot_ms", "ms", 1.0), ("itl_ms", "ms", 1.0)):
        v = res[k]
        t.add_row(
            f"{k.split('_')[0].upper()} {unit} mean / p50 / p90 / p99",
            " / ".join(f"{v[q] * scale:.1f}" for q in ("mean", "p50", "p90", "p99")),
        )
    t.add_row("requests in flight (mean)", f"{res['in_flight_mean']:.1f}")
    t.add_row("decode batch (mean)", f"{res['decode_batch_mean']:.1f}")
    t.add_row("running limit", f"{res['running_limit']:,} ({res['bound_by']})")
    if res["duration_s"]:
        t.add_row("duration s", f"{res['duration_s']:.1f}")
    if res["saturated"]:
        t.add_row("saturated", "arrivals exceed what the instance serves")
    t.add_row("error band (held-out)", res["error_band_note"])
    Console().print(t)


def show(inst, fmt: str, engine: str, input_tokens: int, output_tokens, *args) -> None:
    """Print `perf --phase serve` (table, or JSON/YAML for scripts)."""
    from pdd_plan.cli.common import dumps, echo

    res = serve_result(inst, engine, input_tokens, output_tokens, *args)
    if fmt == "table":
        render(res, f"serve: {inst.model.name} on {inst.label} [{inst.mode}]")
    else:
        echo(dumps(res, fmt))
