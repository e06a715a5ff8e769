"""GenAI-Perf and AIPerf profile exports (`profile_export_genai_perf.json`,
`profile_export_aiperf.json`) as serving runs.

Layout (ai-dynamo/aiperf aiperf/exporters/json_exporter.py @ 030f22db: `JsonExportData`,
`records: {tag: MetricResult}` with `unit`, `avg`, `p50`..`p99`, plus `input_config`, the
user config, whose `loadgen` holds `concurrency` and `request_rate`; GenAI-Perf and later
AIPerf releases put the metric results at the top level and GenAI-Perf's `input_config`
holds `concurrency` / `request_rate` directly). Read: `output_token_throughput.avg`
(tokens/s), `input_sequence_length.avg` and `output_sequence_length.avg` (the lengths drawn),
`request_count.avg` (the run's requests), the concurrency or rate, and the model name.
Neither tool names the serving engine: the run is scheduled as SGLang's (an assumption; the
export's `input_config` says which endpoint, not which engine).
"""

from __future__ import annotations

from typing import Any

from pdd_plan.calibration.json_fields import number
from pdd_plan.common.errors import InputError

FMT = "genai-perf"
FIX = "give the profile_export JSON the tool wrote"
METRICS = ("output_token_throughput", "input_sequence_length", "output_sequence_length")


def _metrics(rec: dict) -> dict:
    inner = rec.get("records")
    return inner if isinstance(inner, dict) else rec


def is_export(rec: dict) -> bool:
    m = _metrics(rec)
    return isinstance(m.get("output_token_throughput"), dict) and "input_config" in rec


def _avg(m: dict, tag: str, file: str, required: bool = True) -> float | None:
    v = m.get(tag)
    if not isinstance(v, dict) or v.get("avg") is None:
        if required:
            raise InputError(file, f"{tag}.avg", "missing", FIX)
        return None
    return number(v["avg"], file, f"{tag}.avg", FIX, lo_open=True)


def _load(cfg: dict, file: str) -> tuple[int | None, float | None]:
    lg: Any = cfg.get("loadgen") if isinstance(cfg.get("loadgen"), dict) else cfg
    conc, rate = lg.get("concurrency"), lg.get("request_rate")
    c = None if conc is None else number(conc, file, "input_config concurrency", FIX, lo=1)
    r = None if rate is None else number(rate, file, "input_config request_rate", FIX, lo_open=True)
    return (None if c is None else int(c)), r


def _model(cfg: dict) -> str | None:
    ep: Any = cfg.get("endpoint") if isinstance(cfg.get("endpoint"), dict) else {}
    for v in (ep.get("model_names"), cfg.get("model_names"), cfg.get("model")):
        if isinstance(v, list) and v and isinstance(v[0], str):
            return v[0]
        if isinstance(v, str):
            return v
    return None


def run_fields(rec: dict, file: str, i: int) -> dict:
    """The `EngineRun` fields of one export (engine_formats builds the run)."""
    m = _metrics(rec)
    cfg: Any = rec.get("input_config")
    if not isinstance(cfg, dict):
        raise InputError(file, "input_config", "missing", FIX)
    conc, rate = _load(cfg, file)
    if conc is None and rate is None:
        raise InputError(file, "input_config", "neither concurrency nor request_rate", FIX)
    count = _avg(m, "request_count", file, required=False)
    serving = {
        "backend": None,
        "max_concurrency": conc,
        "request_rate": "inf" if rate is None else rate,
        "completed": None if count is None else int(round(count)),
    }
    return dict(
        file=file,
        record=i,
        fmt=FMT,
        model=_model(cfg),
        gpu_name=None,
        tp=None,
        ep=None,
        pp=None,
        dp_attention=None,
        isl=_avg(m, "input_sequence_length", file),
        osl=_avg(m, "output_sequence_length", file),
        output_tps=_avg(m, "output_token_throughput", file),
        max_concurrency=conc,
        dtype=None,
        kv_dtype=None,
        serving=serving,
    )
