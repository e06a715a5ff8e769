"""The scenario each `simulate` row of the measurements describes (benchmarks/serving_checks.py).

A row's reading (``data/calibration/readings.yaml``) gives the engine (GPU, model, GPUs per
engine, weight and KV dtypes), the lengths and the GPUs the published figure covers; ``CHECKS``
below gives what the reading leaves to the harness: what kind of figure it is, the SLO with its
source, and the source's layout in words. ``scenario`` turns the two into a pdd-plan scenario
(one datacenter, IDC-PD, Poisson arrivals, fixed lengths), ``groups``/``plan`` into a fleet the
simulator replays at any rate.
"""

from __future__ import annotations

import csv as csvmod
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration.readings import Reading, load_readings
from pdd_plan.inputs.context import Context, build_context
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.outputs.plan import (
    TPOT,
    TTFT,
    ArchitecturePlan,
    InstanceGroup,
    RouteShare,
    Routing,
    Solver,
    TransferSeconds,
)
from pdd_plan.perf import layers

CSV = cal.calibration_dir() / "calibration_measurements.csv"
DC = "dc"  # the one datacenter: IDC-PD moves KV over RDMA, no line


@dataclass(frozen=True)
class SLO:
    ttft_p99_s: float
    tpot_p99_ms: float
    source: str


MLPERF_LLAMA2_SERVER = SLO(
    2.0,
    200.0,
    "mlcommons/inference loadgen/mlperf.conf: llama2-70b.Server.ttft_latency = 2000, "
    "tpot_latency = 200 (ms), *.Server.target_latency_percentile = 99",
)


@dataclass(frozen=True)
class Check:
    """What a simulate row's reading leaves to the harness: the metric's kind, the SLO, and
    the source's layout in words (the engine size, dtypes and lengths are in readings.yaml)."""

    kind: Literal["rate_at_slo", "ttft_alone"]
    slo: SLO | None
    layout: str


CHECKS: dict[int, Check] = {
    22: Check(
        "rate_at_slo",
        MLPERF_LLAMA2_SERVER,
        "4 colocated TP2 TensorRT-LLM engines (in-flight batching, max batch 1024 each)",
    ),
    24: Check(
        "rate_at_slo",
        MLPERF_LLAMA2_SERVER,
        "8 colocated TP1 TensorRT-LLM engines (in-flight batching, max batch 896 each)",
    ),
    26: Check("ttft_alone", None, "1 TensorRT-LLM v0.5 engine, one 128-token prompt alone"),
}


@dataclass(frozen=True)
class Row:
    """One simulate row: its CSV figures, its reading and the harness's check."""

    row: int
    metric: str
    unit: str
    measured: float
    document: str
    reading: Reading
    check: Check

    @property
    def engines(self) -> int:
        """Engines the published figure's GPUs hold (value_gpus / GPUs per engine)."""
        rd = self.reading
        return max(int(round((rd.value_gpus or 1) / (rd.tp or 1))), 1)


def simulate_rows(csv: str | Path = CSV) -> list[Row]:
    """The CSV's `simulate` rows (readings.yaml), each with its check; every simulate row must
    have one (a new row without a check is an error, not a silent skip)."""
    readings = load_readings(csv)
    _, aside = cal.read_rows(csv)
    unit = {i: r["unit"] for i, r in enumerate(_csv(csv), start=1)}
    out = []
    for a in aside:
        if a.use != "simulate":
            continue
        if a.row not in CHECKS:
            raise SystemExit(f"row {a.row} is marked simulate but has no entry in CHECKS")
        out.append(
            Row(
                a.row,
                a.metric,
                unit[a.row],
                a.value,
                a.document,
                readings.rows[a.row],
                CHECKS[a.row],
            )
        )
    return out


# ------------------------------------------------------------------ the scenario


def scenario(r: Row) -> Scenario:
    """The scenario the row's reading describes: its model and GPUs in one datacenter, fixed
    lengths (no source gives the dataset's spread), Poisson arrivals, the SLO as the SLA."""
    rd, slo = r.reading, r.check.slo
    if slo is not None:
        # the replay is judged on p99 (slo_met); ttft_p90 = p99 keeps the SLA well formed, and
        # tpot_ms sets the decode batch the simulator allows (the batch meeting the TPOT limit)
        sla = {"ttft_p90_s": slo.ttft_p99_s, "ttft_p99_s": slo.ttft_p99_s}
        sla["tpot_ms"] = slo.tpot_p99_ms
    else:  # a latency at batch 1: no SLO in the source, and none binds one request
        sla = {"ttft_p90_s": 60.0, "ttft_p99_s": 60.0, "tpot_ms": 1000.0}
    # IDC-PD needs a prefill and a decode engine: at least two even where the source had one
    gpus = max(r.engines, 2) * (rd.tp or 1)
    return Scenario.model_validate(
        {
            "name": f"serving-check-row-{r.row}",
            "model": rd.model,
            "workload": {
                "input_tokens": {"fixed": rd.isl},
                "output_tokens": {"fixed": max(rd.osl, 2)},  # TPOT needs two tokens
                "arrival_cv": 1.0,  # Poisson (MLPerf Server's arrival process)
            },
            "datacenters": [{"name": DC, "gpus": {rd.gpu: gpus}}],
            "sla": sla,
            "architectures": ["idc_pd"],
            "seed": 0,
        }
    )


def context(r: Row, gpu_profile=None) -> Context:
    """The scenario resolved, with the reading's weight and KV dtypes (the engine's settings)
    and, when given, another profile for the row's GPU (held-out factors)."""
    ctx = build_context(scenario(r), "")
    m = ctx.model
    if r.reading.dtype is not None:
        w = m.weights.model_copy(update={"dtype": r.reading.dtype})
        m = m.model_copy(update={"weights": w})
    m = layers.with_kv_dtype(m, r.reading.kv_dtype)
    gpus = dict(ctx.gpus)
    if gpu_profile is not None:
        gpus[r.reading.gpu] = gpu_profile
    return dataclasses.replace(ctx, model=m, gpus=gpus)


def groups(r: Row, prefill: int, decode: int) -> list[InstanceGroup]:
    tp = r.reading.tp or 1
    return [
        InstanceGroup(
            role=role,
            gpu=r.reading.gpu,
            datacenter=DC,
            count=n,
            gpus_per_instance=tp,
            tp=tp,
            dp=1,
            ep=1,
            cost_per_hour=0.0,
        )
        for role, n in (("prefill", prefill), ("decode", decode))
    ]


def plan(gs: list[InstanceGroup], rate: float) -> ArchitecturePlan:
    """A fleet to replay at `rate` (the replay reads the instances, routing and rate only)."""
    return ArchitecturePlan(
        instances=gs,
        line=None,
        cost_per_hour=0.0,
        goodput_rps=rate,
        bcr=0.0,
        ttft_s=TTFT(p50=0, p90=0, p99=0),
        tpot_ms=TPOT(p50=0, p90=0),
        route_share=RouteShare(p_md=1, p_rld_md=0, p_rld=0),
        rld_token_share=0.0,
        routing=Routing(),
        prefill_utilization=0.0,
        kv_transfer_s=TransferSeconds(mean=0),
        binding_constraints=[],
        shadow_prices={},
        solver=Solver(status="given", milps=0, optimality_gap=0.0),
    )


def _csv(path: str | Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csvmod.DictReader(fh))
