"""Parse the result files serving engines write into `EngineRun`s, one per benchmark run.

Layouts (tests/data/engine_results/README.md names the code each comes from, by repository,
path and commit):

- SGLang `python -m sglang.bench_serving --output-file F`: JSON lines, one object per run
  (`backend`, `dataset_name`, `request_rate`, `max_concurrency`, `completed`,
  `total_input_tokens`, `total_output_tokens`, `output_throughput`, ...). No model, GPU or
  parallelism in it.
- vLLM `vllm bench serve --save-result`: one JSON object (`--append-result`: one per line)
  with `date`, `backend`, `model_id`, `num_prompts`, `request_rate` (`"inf"` for all at
  t=0), `max_concurrency`, `completed`, `total_input_tokens`, `total_output_tokens`,
  `output_throughput`, ... ; `--metadata KEY=VALUE` pairs land at the top level, and the keys
  gpu, tp, ep and dp_attention are read from there when present.
- `trtllm-bench throughput --report_json F`: `engine` (model, quantization, kv_cache_dtype),
  `machine` (GPU name), `world_info` (tp_size, pp_size, ep_size, world_size),
  `request_info` (avg_input_length, avg_output_length) and `performance`
  (system_output_throughput_tok_s); or the text report it prints.

A run keeps what the file says and None for what it does not; `engine_results` fills the rest
and turns runs into calibration measurements. Serving runs at a finite request rate that the
server kept up with measured the offered load, not capacity: they carry a note saying so.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdd_plan.common.errors import InputError

SGLANG, VLLM, TRTLLM, CSV = "sglang-bench-serving", "vllm-bench-serve", "trtllm-bench", "csv"
# A run at a finite arrival rate measured capacity only if the server fell behind: completed
# requests/s below this share of the offered rate (Poisson arrivals scatter a kept-up run's
# completion rate by a few percent around the offered rate).
KEPT_UP_SHARE = 0.9
# trtllm-bench `quantization` / `kv_cache_dtype` values -> pdd-plan dtypes
QUANT_DTYPES = {"FP8": "fp8", "FP8_BLOCK_SCALES": "fp8", "NVFP4": "fp4", "FP4": "fp4"}
TORCH_DTYPES = {"bfloat16": "bf16", "float16": "bf16", "fp8": "fp8"}


@dataclass(frozen=True)
class EngineRun:
    """One benchmark run as the file states it (None: the file does not say)."""

    file: str
    record: int  # 1-based: JSON line or object in the file
    fmt: str
    model: str | None  # as the engine printed it (HF id or path)
    gpu_name: str | None
    tp: int | None
    ep: int | None
    pp: int | None
    dp_attention: bool | None
    isl: float | None
    osl: float | None
    output_tps: float  # measured output tokens/s, whole instance
    max_concurrency: int | None
    dtype: str | None
    kv_dtype: str | None
    note: str | None = None  # why the run does not measure capacity (then it is left out)


# ------------------------------------------------------------------ file formats


def _num(rec: dict, key: str, file: str, where: str, required: bool = True) -> float | None:
    v = rec.get(key)
    if v is None:
        if required:
            raise InputError(file, f"{where}{key}", "missing", "give the file the tool wrote")
        return None
    if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(file, f"{where}{key}", f"not a number: {v!r}", "give the tool's file")
    return float(v)


def _lengths(rec: dict, file: str, where: str) -> tuple[float, float]:
    done = _num(rec, "completed", file, where)
    if not done or done < 1:
        raise InputError(file, f"{where}completed", "no completed requests", "rerun the benchmark")
    isl = _num(rec, "total_input_tokens", file, where) / done
    osl = _num(rec, "total_output_tokens", file, where) / done
    return isl, osl


def _offered_load_note(rec: dict, file: str, where: str) -> str | None:
    rate = _num(rec, "request_rate", file, where, required=False)
    if rate is None or math.isinf(rate):
        return None
    served = _num(rec, "request_throughput", file, where, required=False) or 0.0
    if served < KEPT_UP_SHARE * rate:
        return None  # the server fell behind the arrivals: it ran at capacity
    return (
        f"{file} {where.rstrip(': ')}: arrivals at {rate:g} req/s were served at {served:.3f} "
        "req/s, so the run measured the offered load, not capacity; left out"
    )


def _int_or_none(v: Any) -> int | None:
    return None if v is None else int(v)


def _serving_run(rec: dict, file: str, i: int, fmt: str) -> EngineRun:
    """SGLang bench_serving and vLLM bench serve share their result keys (SGLang's script is
    adapted from vLLM's); vLLM adds `model_id` and `--metadata` pairs."""
    where = f"line {i}: "
    isl, osl = _lengths(rec, file, where)
    meta = rec if fmt == VLLM else {}
    dp = meta.get("dp_attention")
    return EngineRun(
        file=file,
        record=i,
        fmt=fmt,
        model=rec.get("model_id"),
        gpu_name=meta.get("gpu"),
        tp=_int_or_none(meta.get("tp")),
        ep=_int_or_none(meta.get("ep")),
        pp=None,
        dp_attention=None if dp is None else str(dp).lower() in ("1", "true", "yes"),
        isl=isl,
        osl=osl,
        output_tps=_num(rec, "output_throughput", file, where),
        max_concurrency=_int_or_none(rec.get("max_concurrency")),
        dtype=None,
        kv_dtype=None,
        note=_offered_load_note(rec, file, where),
    )


def _section(rec: dict, key: str, file: str) -> dict:
    sec = rec.get(key)
    if not isinstance(sec, dict):
        raise InputError(
            file, key, "missing", "give the JSON that trtllm-bench --report_json wrote"
        )
    return sec


def _quant(v: Any) -> str | None:
    return None if v is None else QUANT_DTYPES.get(str(v).upper())


def _trtllm_json(rec: dict, file: str) -> EngineRun:
    eng, world = _section(rec, "engine", file), _section(rec, "world_info", file)
    req, perf = _section(rec, "request_info", file), _section(rec, "performance", file)
    machine = rec.get("machine") if isinstance(rec.get("machine"), dict) else {}
    dtype = _quant(eng.get("quantization")) or TORCH_DTYPES.get(str(eng.get("dtype")).lower())
    return EngineRun(
        file=file,
        record=1,
        fmt=TRTLLM,
        model=eng.get("model"),
        gpu_name=machine.get("name"),
        tp=int(_num(world, "tp_size", file, "world_info.")),
        ep=_int_or_none(_num(world, "ep_size", file, "world_info.", required=False)),
        pp=int(_num(world, "pp_size", file, "world_info.")),
        dp_attention=None,
        isl=_num(req, "avg_input_length", file, "request_info."),
        osl=_num(req, "avg_output_length", file, "request_info."),
        output_tps=_num(perf, "system_output_throughput_tok_s", file, "performance."),
        max_concurrency=None,
        dtype=dtype,
        kv_dtype=_quant(eng.get("kv_cache_dtype")),
    )


# label in trtllm-bench's printed report -> (EngineRun field, kind); `report_statistics`
TEXT_FIELDS = {
    "Model": ("model", str),
    "TP Size": ("tp", int),
    "PP Size": ("pp", int),
    "EP Size": ("ep", int),
    "Quantization": ("dtype", _quant),
    "KV Cache Dtype": ("kv_dtype", _quant),
    "Average Input Length (tokens)": ("isl", float),
    "Average Output Length (tokens)": ("osl", float),
    "Total Output Throughput (tokens/sec)": ("output_tps", float),
}


def _trtllm_text(text: str, file: str) -> EngineRun:
    got: dict[str, Any] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        spec = TEXT_FIELDS.get(label.strip())
        if sep and spec and value.strip() not in ("", "None"):
            got[spec[0]] = spec[1](value.strip())
    m = re.search(r"MACHINE DETAILS\s*\n=+\n([^,\n]+),", text)
    for need, label in (("output_tps", "Total Output Throughput"), ("tp", "TP Size")):
        if need not in got:
            raise InputError(
                file, label, "missing from the trtllm-bench report", "give the whole log"
            )
    return EngineRun(
        file=file,
        record=1,
        fmt=TRTLLM,
        model=got.get("model"),
        gpu_name=m.group(1).strip() if m else None,
        tp=got["tp"],
        ep=got.get("ep"),
        pp=got.get("pp"),
        dp_attention=None,
        isl=got.get("isl"),
        osl=got.get("osl"),
        output_tps=got["output_tps"],
        max_concurrency=None,
        dtype=got.get("dtype"),
        kv_dtype=got.get("kv_dtype"),
    )


def _kind(rec: dict) -> str | None:
    if "performance" in rec and "world_info" in rec:
        return TRTLLM
    if "output_throughput" in rec and "model_id" in rec:
        return VLLM
    if "output_throughput" in rec and "completed" in rec:
        return SGLANG
    return None


FOREIGN = (
    "not a benchmark result: no 'output_throughput' (SGLang bench_serving, vLLM bench serve) "
    "and no 'performance'/'world_info' (trtllm-bench --report_json)"
)


def _records(text: str, file: str) -> list[dict]:
    """The JSON objects of a file: one document, or JSON lines."""
    try:
        doc = json.loads(text)
        return [doc] if isinstance(doc, dict) else [{"": doc}]
    except json.JSONDecodeError:
        pass
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(
                file,
                f"line {i}",
                f"not JSON ({e.msg}; truncated?)",
                "give the file as the tool wrote it",
            ) from None
        out.append(rec if isinstance(rec, dict) else {"": rec})
    return out


def read_runs(path: str | Path) -> list[EngineRun]:
    """The runs in one engine result file (format detected from its content)."""
    p = Path(path)
    f = str(p)
    if not p.is_file():
        raise InputError(f, None, "file not found", "give the path of a benchmark result file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f, None, f"cannot read it: {e}", "give a text result file") from None
    if not text.strip():
        raise InputError(f, None, "empty", "give the file the benchmark wrote")
    if "PERFORMANCE OVERVIEW" in text and "WORLD + RUNTIME INFORMATION" in text:
        return [_trtllm_text(text, f)]
    if text.lstrip()[:1] not in ("{", "["):
        raise InputError(
            f, None, "not JSON and not a trtllm-bench report", "give an engine result file"
        )
    runs = []
    for i, rec in enumerate(_records(text, f), start=1):
        kind = _kind(rec)
        if kind is None:
            raise InputError(
                f, f"line {i}" if i > 1 else None, FOREIGN, "give an engine result file"
            )
        runs.append(_trtllm_json(rec, f) if kind == TRTLLM else _serving_run(rec, f, i, kind))
    return runs
