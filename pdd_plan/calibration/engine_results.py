"""Read the result files serving engines write, as calibration measurements.

`pdd-plan calibrate --from FILE...` fits the efficiency factors to files users already have:
SGLang `bench_serving` JSONL, vLLM `bench serve --save-result` JSON, the `trtllm-bench
throughput` report (JSON or printed) -- parsed by `engine_formats` -- and the repository's
own measurements CSV (`fit.read_measurements`).

What a file does not say (model, GPU, GPU count, parallelism, dtypes, lengths) comes from
`Defaults`, which the command line fills from its flags; a flag that contradicts the file is
refused. A run is one measurement: mean input and output lengths (total tokens / completed
requests) and the measured output tokens/s of the whole instance, predicted with the engine's
scheduler limits (trtllm-bench's own tuning heuristic; SGLang's defaults for SGLang and vLLM
runs, the batch capped by the run's --max-concurrency).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from pdd_plan.calibration import fit
from pdd_plan.calibration.engine_formats import CSV, SGLANG, TRTLLM, VLLM, EngineRun, read_runs  # noqa: F401
from pdd_plan.calibration.fit import Measurement
from pdd_plan.common import limits
from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.perf.offline import ENGINES, TRTLLM_BENCH

# Model names the engines print that are not a profile's own name or HF id: same architecture.
MODEL_ALIASES = {
    "deepseek-r1": "deepseek-v3",  # hardware.md §4.1: DeepSeek-V3 / R1 share one config
    "llama-3.3-70b": "llama-3.1-70b",  # same config.json shapes (fit.MODELS)
}
# GPU names as torch / nvidia-smi print them -> profile, matched on whole tokens
GPU_TOKENS = {
    "GB200": "gb200",
    "B200": "b200",
    "H200": "h200",
    "H100": "h100",
    "H800": "h800",
    "H20": "h20",
    "A100": "a100-80g",
    "L40S": "l40s",
    "MI300X": "mi300x",
}


@dataclass(frozen=True)
class Defaults:
    """Values for what a result file does not say (None: not given)."""

    model: str | None = None
    gpu: str | None = None
    gpus: int | None = None
    tp: int | None = None
    ep: int | None = None
    dp_attention: bool = False
    dtype: str | None = None
    kv_dtype: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


# ------------------------------------------------------------------ names -> profiles


def model_profile_name(raw: str) -> str | None:
    """The bundled model profile an engine's model name (HF id, path) is, or None."""
    base = raw.rstrip("/").split("/")[-1].lower()
    for alias, name in MODEL_ALIASES.items():
        if base.startswith(alias):
            return name
    best: tuple[int, str] | None = None
    for name in profiles.bundled_names("models"):
        hf = (profiles.model(name).hf_id or name).split("/")[-1].lower()
        for key in {name, hf}:
            rest = base[len(key) :]
            # a prefix, and not of a longer version number: deepseek-v3 is not deepseek-v3.2
            if not base.startswith(key) or re.match(r"\.?\d", rest):
                continue
            if best is None or len(key) > best[0]:
                best = (len(key), name)
    return best[1] if best else None


def gpu_profile_name(raw: str) -> str | None:
    """The bundled GPU profile a device name (torch / nvidia-smi) is, or None."""
    for tok in re.findall(r"[A-Z]*\d+[A-Z]*", raw.upper()):
        if tok in GPU_TOKENS:
            return GPU_TOKENS[tok]
    return None


# ------------------------------------------------------------------ runs -> measurements


def _model(run: EngineRun, d: Defaults) -> str:
    named = model_profile_name(run.model) if run.model else None
    if d.model is not None:
        if named is not None and named != d.model:
            raise InputError(
                run.file, "model", f"the file ran {run.model} ({named}), not {d.model}", "drop it"
            )
        return d.model
    if named is None:
        what = (
            f"'{run.model}' is not a bundled model profile"
            if run.model
            else f"{run.fmt} results do not name the model"
        )
        raise InputError(run.file, "model", what, "give the model profile name")
    return named


def _gpu(run: EngineRun, d: Defaults) -> str:
    named = gpu_profile_name(run.gpu_name) if run.gpu_name else None
    gpu = named or d.gpu
    if gpu is None:
        what = (
            f"unknown GPU '{run.gpu_name}'"
            if run.gpu_name
            else f"{run.fmt} results do not name the GPU"
        )
        raise InputError(run.file, "gpu", what, "give the GPU profile name")
    return gpu


def _sizes(run: EngineRun, d: Defaults) -> tuple[int, int]:
    """(GPUs of the instance, TP): an instance is one TP group, as SGLang's --tp-size."""
    if run.pp not in (None, 1):
        raise InputError(run.file, "pp", f"pipeline parallel size {run.pp}", "use a pp=1 run")
    tp = run.tp if run.tp is not None else (d.tp or d.gpus)
    if tp is None:
        raise InputError(
            run.file,
            "gpus",
            f"{run.fmt} results do not give the GPU count",
            "give the instance's GPUs",
        )
    for given, field in ((d.gpus, "gpus"), (d.tp, "tp")):
        if given is not None and given != tp:
            raise InputError(run.file, field, f"{given}, but the run used tp {tp}", "drop it")
    return tp, tp


def _lengths_of(run: EngineRun, d: Defaults) -> tuple[int, int]:
    isl = run.isl if run.isl is not None else d.input_tokens
    osl = run.osl if run.osl is not None else d.output_tokens
    if isl is None or osl is None:
        field = "input_tokens" if isl is None else "output_tokens"
        raise InputError(run.file, field, "mean length not in the file", "give it")
    for v, field in ((isl, "input_tokens"), (osl, "output_tokens")):
        limits.check("TOKENS", v, run.file, field)
    return max(1, round(isl)), max(1, round(osl))


def _ep(run: EngineRun, d: Defaults, model: str, n: int) -> int:
    ep = run.ep if run.ep is not None else d.ep
    moe = profiles.model(model).ffn.moe
    if ep is None:  # the engines' default for MoE: experts spread over the TP group
        return n if moe is not None and moe.num_experts % n == 0 else 1
    return ep if moe is not None else 1


def to_measurement(run: EngineRun, d: Defaults, row: int) -> Measurement:
    """One run as a calibration row; `row` numbers it among everything read."""
    model = _model(run, d)
    n, tp = _sizes(run, d)
    isl, osl = _lengths_of(run, d)
    engine = TRTLLM_BENCH if run.fmt == TRTLLM else ENGINES["sglang"]
    if run.max_concurrency:  # the benchmark capped the requests in flight
        engine = replace(engine, max_batch=run.max_concurrency, limits="fixed")
    kw: dict[str, Any] = dict(
        row=row,
        source=f"{Path(run.file).name} record {run.record} ({run.fmt})",
        gpu=_gpu(run, d),
        n_gpus=n,
        tp=tp,
        model=model,
        dtype=run.dtype or d.dtype,
        kv_dtype=run.kv_dtype or d.kv_dtype,
        isl=isl,
        osl=osl,
        value=run.output_tps,
        engine=engine,
    )
    # expert and attention-data parallelism, for a Measurement that carries them
    dp_att = run.dp_attention if run.dp_attention is not None else d.dp_attention
    extra = {"ep": _ep(run, d, model, n), "dp": tp if dp_att else 1}
    names = {f.name for f in fields(Measurement)}
    kw.update({k: v for k, v in extra.items() if k in names})
    if run.serving is not None:  # a serving client's run: predicted through the serve phase
        from pdd_plan.calibration.serving_runs import ServingMeasurement, serving_fields

        kw.update(serving_fields(run.serving, run.fmt, run.file), phase="serve")
        return ServingMeasurement(**kw)
    return Measurement(**kw)


def _is_csv(path: Path) -> bool:
    if path.suffix.lower() == ".csv":
        return True
    try:
        with path.open(encoding="utf-8") as fh:
            return fh.readline().startswith("source,hardware,")
    except (OSError, UnicodeDecodeError):
        return False


def read_results(
    paths: list[str], defaults: Defaults | None = None
) -> tuple[list[Measurement], list[str]]:
    """Measurements from result files of any supported format, and notes on runs left out.
    One CSV alone keeps its own row numbers; otherwise rows are numbered in reading order."""
    d = defaults or Defaults()
    meas: list[Measurement] = []
    notes: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_file() and _is_csv(p):
            meas += fit.read_measurements(p)
            continue
        for run in read_runs(p):
            if run.note:
                notes.append(run.note)
            else:
                meas.append(to_measurement(run, d, len(meas) + 1))
    if len(paths) > 1:
        meas = [replace(m, row=i) for i, m in enumerate(meas, start=1)]
    if not meas:
        raise InputError(
            ", ".join(map(str, paths)), None, "no capacity runs in it", "; ".join(notes)
        )
    return meas, notes
