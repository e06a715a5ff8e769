"""Commands `perf`, `calibrate` (cli/calibrate.py) and `profiles import-hf` (registered on the
main app)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from pdd_plan.cli import perf_serve
from pdd_plan.cli.common import check_format, dumps, echo, flag_names, guarded, write_atomic
from pdd_plan.common import limits, numbers
from pdd_plan.common.atomic import check_output
from pdd_plan.common.errors import InputError
from pdd_plan.common.files import read_text

PHASES = ("prefill", "decode", "extend", "offline", "serve")


def _instance(model: str, gpu: str, gpus, tp, ep, dp, dp_attention, dtype, kv_dtype, moe_opts=None):
    from pdd_plan.inputs import profiles
    from pdd_plan.perf import layers
    from pdd_plan.perf.instance import Instance, parallelism_candidates

    with flag_names(kv_dtype="--kv-dtype"):
        m = layers.with_kv_dtype(profiles.model(model, "--model"), kv_dtype)
    g = profiles.gpu(gpu, "--gpu")
    if dtype is not None and dtype not in layers.DTYPE_BYTES:
        raise InputError(None, "--dtype", f"unknown dtype '{dtype}'", "use bf16, fp8 or fp4")
    if gpus is None and tp is None:
        if ep is None and dp is None and not dp_attention:
            cands = parallelism_candidates(m, g, max_gpus=64, extra_sizes=0, dtype=dtype)
            if not cands:
                raise InputError(
                    None,
                    "--gpus",
                    f"{m.name} does not fit on up to 64 x {g.name}",
                    "use a larger-memory GPU or a smaller --dtype",
                )
            return cands[0]
        gpus = 1
    n = int(gpus if gpus is not None else tp)
    limits.check("GPUS", n, None, "--gpus" if gpus is not None else "--tp")
    tp_flag = "--tp" if tp is not None else "--gpus"  # tp defaults to --gpus: name what was set
    tp = n if tp is None else int(tp)
    moe = m.ffn.moe
    opts = dict(moe_opts or {})
    slots = (moe.num_experts + opts.get("redundant_experts", 0)) if moe is not None else 0
    if ep is None:
        ep = n if (moe is not None and slots % n == 0) else 1
    if dp is None:
        dp = tp if dp_attention else 1
    with flag_names(
        tp=tp_flag,
        dp="--dp",
        ep="--ep",
        parallelism="--gpus",
        gpus="--gpus",
        redundant_experts="--redundant-experts",
    ):
        inst = Instance(m, g, n, tp=tp, ep=int(ep), dp=int(dp), dtype=dtype, **opts)
        inst.require_fit()
    return inst


def _need_positive(value, flag: str) -> None:
    if value is not None and value < 0:
        raise InputError(None, flag, f"must be >= 0, got {value}", "give a non-negative count")


def _check_lengths(phase: str, L: float, out_n: int | None, extend_tokens: int) -> None:
    if out_n is not None and out_n < 1:
        raise InputError(None, "--output-tokens", f"must be >= 1, got {out_n}", "e.g. 512")
    if phase == "extend" and extend_tokens > L:
        raise InputError(
            None, "--extend-tokens", f"{extend_tokens} recomputed of {L:g} tokens", "use k <= L"
        )


def perf_result(
    inst,
    phase: str,
    input_tokens: int,
    output_tokens: int | None = None,
    cached_tokens: int = 0,
    batch: int | None = None,
    chunk: int = 8192,
    extend_tokens: int = 64,
    engine: str = "sglang",
) -> dict:
    """The numbers `pdd-plan perf` prints, as a plain dict."""
    from pdd_plan.perf import roofline
    from pdd_plan.perf.offline import ENGINES, offline_throughput

    if phase not in PHASES:
        raise InputError(None, "--phase", f"unknown phase '{phase}'", f"use {' | '.join(PHASES)}")
    L, out_n, C = float(input_tokens), output_tokens, float(cached_tokens or 0)
    if L <= 0:
        raise InputError(None, "--input-tokens", "must be > 0", "give the prompt length")
    if C > L or C < 0:
        raise InputError(
            None, "--cached-tokens", f"{C:g} cached of {L:g} input tokens", "use 0 <= C <= L"
        )
    _check_lengths(phase, L, out_n, extend_tokens)
    if batch is not None and batch < 1:
        raise InputError(None, "--batch", "must be >= 1", "give the concurrent requests")
    _check_sizes(inst, phase, L, C, out_n, batch, chunk, extend_tokens)
    out: dict = {"phase": phase, "instance": _describe(inst)}
    kv_tokens = inst.kv_capacity_tokens
    if phase == "offline":
        if not out_n or out_n < 1:
            raise InputError(
                None, "--output-tokens", "offline needs it", "e.g. --output-tokens 512"
            )
        if engine not in ENGINES:
            raise InputError(None, "--engine", f"unknown '{engine}'", f"use {', '.join(ENGINES)}")
        eng = ENGINES[engine]
        if batch is not None:
            from dataclasses import replace

            eng = replace(eng, max_batch=int(batch), limits="fixed")
        r = offline_throughput(inst, L, out_n, eng)
        if r.batch < 1:
            raise InputError(
                None,
                "--input-tokens",
                f"one request of {L + out_n:g} tokens does not fit the KV pool "
                f"({r.kv_capacity_tokens:,.0f} tokens)",
                "use more GPUs or shorter requests",
            )
        t, lat, b, thr = r.breakdown, r.request_latency_s, r.batch, r.output_tokens_per_s
        off = r
        kv_tokens = r.kv_capacity_tokens
        out["offline"] = {
            "engine": r.engine,
            "batch_limit": r.batch_limit,
            "iteration_s": r.iteration_s,
            "prefill_share_of_iterations": r.prefill_share,
            "prefill_tokens_per_iteration": r.prefill_tokens_per_pass,
            "max_num_tokens": r.max_num_tokens,
        }
    else:
        b, off = int(batch or 1), None
        if phase == "prefill":
            ctx = L
            t = roofline.batch_prefill_time(inst, b, L - C, C, chunk)
            lat = t.total_s
            thr = b * (L - C) / lat if lat > 0 else 0.0
        elif phase == "decode":
            ctx = L + (out_n or 0) / 2.0
            t = roofline.decode_step(inst, b, ctx)
            lat = t.total_s
            thr = b / lat
        else:  # extend: k relay tokens recomputed on a cached context of L
            k = float(extend_tokens)
            if k < 1:
                raise InputError(None, "--extend-tokens", "must be >= 1", "e.g. 64")
            ctx = L + k
            t = roofline.mixed_pass(inst, prefill_seqs=b, prefill_new=k, prefill_cached=L)
            lat = t.total_s
            thr = b * k / lat
        out["max_batch_at_context"] = inst.max_batch(ctx)  # checked by _check_sizes
    out.update(
        {
            "latency_s": lat,
            "throughput_tokens_per_s": thr,
            "throughput_unit": "prefilled tokens/s"
            if phase in ("prefill", "extend")
            else "output tokens/s",
            "batch": b,
            "bound": t.bound,
            "kv_capacity_tokens": kv_tokens,
            "mode": inst.mode,
            # time of compute-bound kernels, memory-bound kernels, the communication left on
            # the critical path and per-pass overhead: they add up to the pass(es) (offline:
            # the mean iteration)
            "breakdown_s": {
                "compute": t.as_dict()["compute_bound_s"],
                "memory": t.as_dict()["memory_bound_s"],
                "exposed_communication": t.exposed_communication_s,
                "overhead": t.overhead_s,
            },
            # link time of all-to-all and all-reduces, and the part two-batch overlap hides
            "communication_s": {
                "total": t.communication_s,
                "hidden_by_overlap": t.hidden_communication_s,
            },
            # all FLOPs at the achieved FLOP rate, all HBM bytes at the achieved bandwidth
            "roofline_s": {"flops": t.compute_s, "bytes": t.memory_s},
            # the factors of the model's family on this GPU, and how they were estimated
            "efficiency": {
                k: getattr(inst.efficiency, k)
                for k in ("mfu", "mbu", "step_overhead_ms", "comm_efficiency")
            },
            "efficiency_family": inst.family,
            # each term that slows a pass down from its roofline, at the run's first pass
            "terms": _terms(inst, phase, b, L - C, chunk, float(extend_tokens or 0), off),
            "efficiency_basis": inst.gpu.efficiency.basis(inst.family),
            "factors_at_bound": _at_bound(inst),
        }
    )
    return out


def _terms(inst, phase: str, b: int, new: float, chunk: int, k: float, off=None) -> dict:
    """The slow-down terms (perf/moe_terms.py) at the first pass of the run `perf` shows."""
    from pdd_plan.perf import moe_terms

    if phase == "offline":  # the mean iteration: the batch's decode rows + its prefill share
        tokens, requests = off.batch + off.prefill_share * off.prefill_tokens_per_pass, off.batch
    elif phase == "decode":
        tokens, requests = float(b), float(b)
    elif phase == "extend":
        tokens, requests = b * k, float(b)
    else:  # prefill: the first pass of the chunk budget (per DP group)
        budget = chunk * inst.dp
        seqs = 1 if new >= budget else min(b, max(1, int(budget // max(new, 1.0))))
        tokens, requests = min(new, budget) * seqs, float(seqs)
    kernels = "prefill" if phase in ("prefill", "extend") else "decode"
    return {"pass_tokens": tokens, **moe_terms.breakdown(inst, tokens, requests, kernels)}


def _context(phase: str, L: float, out_n: int | None, extend_tokens: int) -> float:
    """Tokens of context each request holds in the pass `perf` evaluates."""
    if phase == "decode":
        return L + (out_n or 0) / 2.0
    if phase == "extend":
        return L + float(extend_tokens)
    return L


def _at_bound(inst) -> list[str]:
    from pdd_plan.calibration.fit import factors_at_bound

    return factors_at_bound(inst.gpu.efficiency)


def _check_sizes(
    inst, phase: str, L: float, C: float, out_n, batch, chunk: int, extend_tokens: int
) -> None:
    """Every size bounded before any work: the work (and memory) grows with the batch (one
    context per request in a decode step) and with the prefill passes (one per chunk)."""

    limits.check("TOKENS", L, None, "--input-tokens")
    limits.check("TOKENS", out_n or 0, None, "--output-tokens")
    limits.check("BATCH", batch or 1, None, "--batch")
    if phase == "prefill" and L - C >= chunk:
        need = int(-(-(L - C) // limits.value("PREFILL_PASSES")))
        passes = limits.prefill_passes(L - C, chunk)
        limits.check("PREFILL_PASSES", passes, None, "--chunk", f"use --chunk >= {need:,}")
    if phase == "offline":
        return  # --batch is a cap there, not a demand
    batch = int(batch or 1)
    ctx = _context(phase, L, out_n, extend_tokens)
    # an explicit --batch is the engine's configured limit: only the KV pool can refuse it
    cap = inst.kv_max_batch(ctx)
    if batch > cap:
        from pdd_plan.perf.kv_refusal import kv_refusal

        raise InputError(None, "--batch", *kv_refusal(inst, batch, ctx))


def _describe(inst) -> dict:
    return {
        "model": inst.model.name,
        "gpu": inst.gpu.name,
        "gpus": inst.n_gpus,
        "tp": inst.tp,
        "ep": inst.ep,
        "dp": inst.dp,
        "dtype": inst.compute_dtype,
        "kv_dtype": inst.model.kv_cache.dtype,
        "weights_per_gpu_gb": inst.weight_bytes_per_gpu / 1e9,
        "kv_pool_gb": inst.kv_pool_bytes / 1e9,
        "label": inst.label,
        "redundant_experts": inst.redundant_experts,
        # true/false as set; "auto": the engine default, used on the passes it speeds up
        "two_batch_overlap": inst.two_batch_overlap
        if inst.two_batch_overlap is not None
        else ("auto" if inst.tbo else False),
        "expert_imbalance": inst.expert_imbalance,
    }


def _render_table(res: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    i = res["instance"]
    title = (
        f"{res['phase']}: {i['model']} on {i['label']} ({i['dtype']} weights, "
        f"{i['kv_dtype']} KV) [{res['mode']}]"
    )
    t = Table(title=title, show_header=True)
    t.add_column("quantity")
    t.add_column("value", justify="right", overflow="fold")
    b = res["breakdown_s"]
    tot = sum(b.values())
    for k in ("compute", "memory", "exposed_communication", "overhead"):
        share = f" ({b[k] / tot:.0%})" if tot > 0 else ""
        t.add_row(f"{k.replace('_', ' ')} s", f"{b[k]:.4g}{share}")
    c = res["communication_s"]
    if c["total"] > 0:
        t.add_row(
            "communication s (link time)",
            f"{c['total']:.4g} ({c['hidden_by_overlap']:.4g} hidden by two-batch overlap)",
        )
    t.add_row("bound", res["bound"])
    t.add_row("latency s", f"{res['latency_s']:.4g}")
    t.add_row(f"throughput ({res['throughput_unit']})", f"{res['throughput_tokens_per_s']:,.0f}")
    t.add_row("batch (requests)", str(res["batch"]))
    if "max_batch_at_context" in res:
        t.add_row("max batch at this context", f"{res['max_batch_at_context']:,}")
    t.add_row("KV capacity (tokens)", f"{res['kv_capacity_tokens']:,.0f}")
    t.add_row("weights per GPU (GB)", f"{i['weights_per_gpu_gb']:.1f}")
    for k, v in res.get("offline", {}).items():
        t.add_row(k.replace("_", " "), f"{v:.4g}" if isinstance(v, float) else str(v))
    e = res["efficiency"]
    t.add_row("efficiency", ", ".join(f"{k} {v:g}" for k, v in e.items()))
    t.add_row(f"{res['efficiency_family']} factors", res["efficiency_basis"])
    if res.get("factors_at_bound"):
        t.add_row("FACTORS AT A FIT BOUND", "; ".join(res["factors_at_bound"]))
    terms = {k: v for k, v in res["terms"].items() if v is not None}
    t.add_row("slow-down terms", ", ".join(f"{k} {v:.4g}" for k, v in terms.items()))
    if "error_band_note" in res:
        t.add_row("error band (held-out)", res["error_band_note"])
    Console().print(t)


def perf(
    model: str = typer.Option(..., "--model", "-m", help="Model profile name or YAML path."),
    gpu: str = typer.Option(..., "--gpu", "-g", help="GPU profile name or YAML path."),
    gpus: int = typer.Option(None, "--gpus", help="GPUs per instance (default: smallest fit)."),
    tp: int = typer.Option(None, "--tp", help="Tensor parallel size (default: --gpus)."),
    ep: int = typer.Option(None, "--ep", help="Expert parallel size (default: --gpus for MoE)."),
    dp_attention: bool = typer.Option(
        False, "--dp-attention", help="Data-parallel attention (SGLang --enable-dp-attention)."
    ),
    dp: int = typer.Option(None, "--dp", help="DP-attention groups (default with it: --tp)."),
    redundant_experts: int = typer.Option(
        0,
        "--redundant-experts",
        help="Extra expert slots for EPLB (SGLang --ep-num-redundant-experts); EP must divide "
        "experts + N.",
    ),
    two_batch_overlap: bool = typer.Option(
        None,
        "--two-batch-overlap/--no-two-batch-overlap",
        help="Overlap all-to-all with compute over two micro-batches (default: on for EP with "
        "DP attention, as SGLang's large-EP recipe).",
    ),
    dtype: str = typer.Option(None, "--dtype", help="Weight dtype: bf16 | fp8 | fp4."),
    kv_dtype: str = typer.Option(None, "--kv-dtype", help="KV-cache dtype: bf16 | fp8."),
    phase: str = typer.Option(..., "--phase", help="prefill | decode | extend | offline"),
    input_tokens: int = typer.Option(
        ..., "--input-tokens", "-L", help="Prompt length (decode/extend: the context)."
    ),
    output_tokens: int = typer.Option(
        None, "--output-tokens", "-O", help="Output length (offline; decode: mean context L+O/2)."
    ),
    cached_tokens: int = typer.Option(0, "--cached-tokens", "-C", help="Cached prefix of L."),
    batch: int = typer.Option(
        None, "--batch", "-B", help="Concurrent requests on the whole instance (offline: a cap)."
    ),
    extend_tokens: int = typer.Option(64, "--extend-tokens", help="extend: k tokens recomputed."),
    chunk: int = typer.Option(8192, "--chunk", help="Prefill chunk (tokens per pass)."),
    engine: str = typer.Option("sglang", "--engine", help="sglang|trtllm-bench; serve: +vllm"),
    concurrency: int = typer.Option(None, "--concurrency", help="serve: closed loop, C in flight."),
    rate: float = typer.Option(None, "--rate", help="serve: open loop, Poisson requests/s."),
    num_prompts: int = typer.Option(None, "--num-prompts", help="serve: a finite run's requests."),
    range_ratio: float = typer.Option(None, "--range-ratio", help="serve: random lengths' ratio."),
    lengths: str = typer.Option("sglang", "--lengths", help="serve: sglang|vllm draws, or a CSV"),
    prefill_graphs: bool = perf_serve.PREFILL_GRAPHS,
    format: str = typer.Option("table", "--format", "-f", help="table | json | yaml"),
) -> None:
    """One instance, explained: latency, throughput and what bounds a prefill, decode step,
    extend, offline (continuous-batching) run or a benchmark client's serving run (serve)."""
    fmt = check_format(format)
    for v, flag in ((gpus, "--gpus"), (tp, "--tp"), (ep, "--ep"), (dp, "--dp")):
        if v is not None and v < 1:
            raise InputError(None, flag, f"must be >= 1, got {v}", "give a positive size")
    if chunk < 1:
        raise InputError(None, "--chunk", "must be >= 1", "e.g. 8192")
    if dp is not None and not dp_attention:  # --dp alone would be silently ignored
        raise InputError(None, "--dp", "needs --dp-attention", "add --dp-attention or drop --dp")
    _need_positive(redundant_experts, "--redundant-experts")
    moe_opts = {"redundant_experts": redundant_experts, "two_batch_overlap": two_batch_overlap}
    inst = _instance(model, gpu, gpus, tp, ep, dp, dp_attention, dtype, kv_dtype, moe_opts)
    perf_serve.serve_only(phase, prefill_graphs=prefill_graphs)
    if phase == "serve":
        args = (concurrency, rate, num_prompts, range_ratio, lengths, batch, prefill_graphs)
        return perf_serve.show(inst, fmt, engine, input_tokens, output_tokens, *args)
    res = perf_result(
        inst,
        phase,
        input_tokens,
        output_tokens,
        cached_tokens,
        batch,
        chunk,
        extend_tokens,
        engine,
    )
    # how far off such predictions were on held-out measurements of the model's family
    from pdd_plan.calibration.measurements import regime_of
    from pdd_plan.inputs.error_band import band_for_model

    batch_n = res.get("batch") if phase in ("decode", "extend") else None
    regime = regime_of(phase, batch_n, float(input_tokens), phase in ("prefill", "offline"))
    res["error_band"], res["error_band_note"] = band_for_model(inst.model, regime=regime)
    if fmt == "table":
        _render_table(res)
    else:
        echo(dumps(res, fmt))


def import_hf(
    config: str = typer.Argument(..., help="A HuggingFace config.json."),
    name: str = typer.Option(..., "--name", help="Profile name (the YAML's `name`)."),
    out: Path = typer.Option(None, "--out", "-o", help="Write the YAML here (default: stdout)."),
) -> None:
    """Build a model profile YAML from a HuggingFace config.json."""
    import yaml

    from pdd_plan.calibration.hf_import import profile_from_hf

    fix = "give the path of a config.json"
    raw = read_text(config, fix)  # noted as an input: --out must not replace it
    if out is not None:
        check_output(out, "--out")
    try:
        cfg = numbers.load_document(raw, config, fix)
    except (json.JSONDecodeError, RecursionError) as e:
        raise InputError(config, None, f"not valid JSON: {e}", fix) from None
    prof = profile_from_hf(cfg, name, Path(config).name)
    text = yaml.safe_dump(prof.model_dump(mode="json", exclude_none=True), sort_keys=False)
    if out is None:
        echo(text)
    else:
        write_atomic(out, text)
        echo(f"wrote {out}\n")


def register(app: typer.Typer, profiles_app: typer.Typer) -> None:
    from pdd_plan.cli.calibrate import calibrate

    app.command("perf")(guarded(perf))
    app.command("calibrate")(guarded(calibrate))
    profiles_app.command("import-hf")(guarded(import_hf))
