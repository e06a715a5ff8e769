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
from typing import Any, cast

from pdd_plan.calibration import serving_exports
from pdd_plan.calibration.json_fields import count, number, string
from pdd_plan.common import numbers
from pdd_plan.common.errors import InputError
from pdd_plan.common.files import read_text

SGLANG, VLLM, TRTLLM, CSV = "sglang-bench-serving", "vllm-bench-serve", "trtllm-bench", "csv"
# A run at a finite arrival rate measured capacity only if the server fell behind: completed
# requests/s below this share of the offered rate (Poisson arrivals scatter a kept-up run's
# completion rate by a few percent around the offered rate).
KEPT_UP_SHARE = 0.9
# trtllm-bench `quantization` / `kv_cache_dtype` values -> pdd-plan dtypes
QUANT_DTYPES = {"FP8": "fp8", "FP8_BLOCK_SCALES": "fp8", "NVFP4": "fp4", "FP4": "fp4"}
TORCH_DTYPES = {"bfloat16": "bf16", "float16": "bf16", "fp8": "fp8"}
TRUE, FALSE = {"1", "true", "yes"}, {"0", "false", "no"}
SERVING_KEYS = ("backend", "dataset_name", "request_rate", "max_concurrency", "completed",
                "random_range_ratio", "version", "engine_version")  # fmt: skip
MAX_SIZE = 1_000_000  # GPUs of one instance or requests in flight: far above any real run


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
    # a serving client's record (bench_serving, vllm bench serve): read through the serve
    # phase (calibration/serving_runs.py)
    serving: dict | None = None


# ------------------------------------------------------------------ file formats


FIX_FILE = "give the file the benchmark wrote"


def _num(
    rec: dict, key: str, file: str, where: str, required: bool = True, **bounds: Any
) -> float | None:
    """A number of a record (``"inf"``: infinity, where ``allow_inf``), checked: a string, a
    negative, NaN or 1e300 is a one-line error naming the key."""
    allow_inf = bounds.pop("allow_inf", False)
    v = rec.get(key)
    if v is None:
        if required:
            raise InputError(file, f"{where}{key}", "missing", FIX_FILE)
        return None
    if allow_inf and (
        (isinstance(v, str) and v.strip().lower() in ("inf", "infinity"))
        or (isinstance(v, float) and v == math.inf)
    ):
        return math.inf
    return number(v, file, f"{where}{key}", FIX_FILE, **bounds)


def _lengths(rec: dict, file: str, where: str) -> tuple[float, float]:
    """Mean input and output tokens per completed request (each at least one token)."""
    done = _num(rec, "completed", file, where, whole=True)
    if not done or done < 1:
        raise InputError(file, f"{where}completed", "no completed requests", "rerun the benchmark")
    out = []
    for key in ("total_input_tokens", "total_output_tokens"):
        total = cast(float, _num(rec, key, file, where, whole=True))  # required: not None
        if total < done:
            raise InputError(
                file,
                f"{where}{key}",
                f"{total:g} tokens for {done:g} completed requests (under one each)",
                FIX_FILE,
            )
        out.append(total / done)
    return out[0], out[1]


def _offered_load_note(rec: dict, file: str, where: str) -> str | None:
    rate = _num(rec, "request_rate", file, where, required=False, lo_open=True, allow_inf=True)
    served = _num(rec, "request_throughput", file, where, required=False) or 0.0
    if rate is None or math.isinf(rate):
        return None
    if served < KEPT_UP_SHARE * rate:
        return None  # the server fell behind the arrivals: it ran at capacity
    return (
        f"{file} {where.rstrip(': ')}: arrivals at {rate:g} req/s were served at {served:.3f} "
        "req/s, so the run measured the offered load, not capacity; left out"
    )


def _size(rec: dict, key: str, file: str, where: str) -> int | None:
    """A parallel size or concurrency (vLLM `--metadata tp=8` gives the string "8")."""
    v = rec.get(key)
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v.strip())
    return None if v is None else count(v, file, f"{where}{key}", FIX_FILE, hi=MAX_SIZE)


def _flag(rec: dict, key: str, file: str, where: str) -> bool | None:
    v = rec.get(key)
    if v is None or isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if isinstance(v, int | str) and s in TRUE | FALSE:
        return s in TRUE
    raise InputError(
        file, f"{where}{key}", f"must be true or false (got {v!r})"[:200], "e.g. dp_attention=true"
    )


def _name(rec: dict, key: str, file: str, where: str) -> str | None:
    v = rec.get(key)
    return None if v is None else string(v, file, f"{where}{key}", FIX_FILE)


def _throughput(rec: dict, key: str, file: str, where: str) -> float:
    """Measured output tokens/s: above zero (a run that produced nothing measured nothing)."""
    return cast(float, _num(rec, key, file, where, lo_open=True))


def _serving_run(rec: dict, file: str, i: int, fmt: str) -> EngineRun:
    """SGLang bench_serving and vLLM bench serve share their result keys (SGLang's script is
    adapted from vLLM's); vLLM adds `model_id` and `--metadata` pairs."""
    where = f"line {i}: "
    isl, osl = _lengths(rec, file, where)
    meta = rec if fmt == VLLM else {}
    return EngineRun(
        file=file,
        record=i,
        fmt=fmt,
        model=_name(rec, "model_id", file, where),
        gpu_name=_name(meta, "gpu", file, where),
        tp=_size(meta, "tp", file, where),
        ep=_size(meta, "ep", file, where),
        pp=None,
        dp_attention=_flag(meta, "dp_attention", file, where),
        isl=isl,
        osl=osl,
        output_tps=_throughput(rec, "output_throughput", file, where),
        max_concurrency=_size(rec, "max_concurrency", file, where),
        dtype=None,
        kv_dtype=None,
        note=_offered_load_note(rec, file, where),
        serving={k: rec.get(k) for k in SERVING_KEYS if k in rec},
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


def _length(rec: dict, key: str, file: str, where: str) -> float:
    return cast(float, _num(rec, key, file, where, lo=1.0))


def _trtllm_json(rec: dict, file: str) -> EngineRun:
    eng, world = _section(rec, "engine", file), _section(rec, "world_info", file)
    req, perf = _section(rec, "request_info", file), _section(rec, "performance", file)
    machine: Any = rec.get("machine") if isinstance(rec.get("machine"), dict) else {}
    dtype = _quant(_name(eng, "quantization", file, "engine.")) or TORCH_DTYPES.get(
        str(_name(eng, "dtype", file, "engine.")).lower()
    )
    tp, pp = (_size(world, k, file, "world_info.") for k in ("tp_size", "pp_size"))
    for v, key in ((tp, "tp_size"), (pp, "pp_size")):
        if v is None:
            raise InputError(file, f"world_info.{key}", "missing", FIX_FILE)
    return EngineRun(
        file=file,
        record=1,
        fmt=TRTLLM,
        model=_name(eng, "model", file, "engine."),
        gpu_name=_name(machine, "name", file, "machine."),
        tp=tp,
        ep=_size(world, "ep_size", file, "world_info."),
        pp=pp,
        dp_attention=None,
        isl=_length(req, "avg_input_length", file, "request_info."),
        osl=_length(req, "avg_output_length", file, "request_info."),
        output_tps=_throughput(perf, "system_output_throughput_tok_s", file, "performance."),
        max_concurrency=None,
        dtype=dtype,
        kv_dtype=_quant(_name(eng, "kv_cache_dtype", file, "engine.")),
    )


def _text_number(v: str) -> float | str:
    """A number as the report prints it; the text itself when it is none (the check says so)."""
    try:
        return float(v)
    except ValueError:
        return v


# label in trtllm-bench's printed report -> (EngineRun field, reader); `report_statistics`
TEXT_FIELDS = {
    "Model": ("model", _name),
    "TP Size": ("tp", _size),
    "PP Size": ("pp", _size),
    "EP Size": ("ep", _size),
    "Quantization": ("dtype", lambda r, k, f, w: _quant(_name(r, k, f, w))),
    "KV Cache Dtype": ("kv_dtype", lambda r, k, f, w: _quant(_name(r, k, f, w))),
    "Average Input Length (tokens)": ("isl", _length),
    "Average Output Length (tokens)": ("osl", _length),
    "Total Output Throughput (tokens/sec)": ("output_tps", _throughput),
}
TEXT_NAMES = {"model", "dtype", "kv_dtype"}


def _trtllm_text(text: str, file: str) -> EngineRun:
    got: dict[str, Any] = {}
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        spec = TEXT_FIELDS.get(label.strip())
        if sep and spec and value.strip() not in ("", "None"):
            v = value.strip() if spec[0] in TEXT_NAMES else _text_number(value.strip())
            got[spec[0]] = spec[1]({label.strip(): v}, label.strip(), file, "")
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
        doc = numbers.loads(text)
        return [doc] if isinstance(doc, dict) else [{"": doc}]
    except numbers.NumberTooLarge as e:
        raise InputError(file, e.field, e.problem, e.fix) from None
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise InputError(file, None, "JSON nested too deeply", FIX_FILE) from None
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = numbers.loads(line)
        except numbers.NumberTooLarge as e:
            where = f"line {i}" + (f" {e.field}" if e.field else "")
            raise InputError(file, where, e.problem, e.fix) from None
        except RecursionError:
            raise InputError(file, f"line {i}", "JSON nested too deeply", FIX_FILE) from None
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
    f = str(path)
    text = read_text(path, "give the path of a benchmark result file")
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
            if serving_exports.is_export(rec):  # GenAI-Perf / AIPerf
                runs.append(EngineRun(**serving_exports.run_fields(rec, f, i)))
                continue
            raise InputError(
                f, f"line {i}" if i > 1 else None, FOREIGN, "give an engine result file"
            )
        runs.append(_trtllm_json(rec, f) if kind == TRTLLM else _serving_run(rec, f, i, kind))
    return runs
