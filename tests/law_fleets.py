"""Hand-written fleets for the law-vs-replay tests: a bundled example's workload on a fleet
written here (not the one the optimizer buys, which moves with every recalibration), evaluated
as `pdd-plan evaluate` does (`evaluate.analytic.at_rate`: the fleet's own MILP routing) and
replayed (`sim.run`, seeded) at the same rate: the same fleet, the same line, no optimizer in
between."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.profiles import data_dir, example_path
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.sim.run import run
from pdd_plan.workload.classes import build_classes

# an SLA loose enough that every figure is a law's, not a refusal
LOOSE = {"ttft_p90_s": 100, "ttft_p99_s": 200, "tpot_ms": 60}


def row(role: str, gpu: str, dc: str, count: int, gpus: int) -> dict:
    return {"role": role, "gpu": gpu, "datacenter": dc, "count": count, "gpus_per_instance": gpus}


# The default's PDD fleet as `pdd-plan optimize` buys it (6 x 16 H100 prefill, ~97% busy at
# 40 req/s; 1 x 32 H200 main decode; 1 x 16 H100 relay decode; one shared-25g line ~84% used):
# written here so a recalibration, which moves what the optimizer buys, does not move the test.
DEFAULT_PDD = (
    row("prefill", "h100", "dc-a", 6, 16),
    row("main_decode", "h200", "dc-b", 1, 32),
    row("relay_decode", "h100", "dc-a", 1, 16),
)


@dataclass(frozen=True)
class Case:
    """One hand-written fleet: ``example``'s workload at ``rate`` (gap CV ``cv``), ``rows`` of
    instances, one line on the bundled profile ``line_base`` with ``line`` changed (``None``:
    no line, IDC-PD), replayed ``n`` requests."""

    name: str
    arch: str
    rate: float
    rows: tuple[dict, ...]
    line: dict | None = field(default_factory=dict)
    line_base: str = "shared-10g"
    example: str = "pdd-paper"
    cv: float | None = None
    n: int = 20_000
    sla: dict | None = None  # None: LOOSE
    policy: dict | None = None


def scenario(tmp: Path, c: Case) -> str:
    """``c`` written as a scenario file with a ``fleet:`` (and its line profile) under ``tmp``."""
    d = yaml.safe_load(example_path(c.example).read_text())
    d["workload"]["rate_rps"] = c.rate
    if c.cv is not None:
        d["workload"]["arrival_cv"] = c.cv
    d["architectures"] = [c.arch]
    d["sla"] = dict(c.sla or LOOSE)
    if c.policy:
        d["policy"] = {**d.get("policy", {}), **c.policy}
    fl: dict = {"instances": [dict(r) for r in c.rows]}
    if c.line is not None:
        base = data_dir() / "profiles" / "lines" / f"{c.line_base}.yaml"
        prof = yaml.safe_load(base.read_text())
        prof.update(c.line, name="t-line")
        lp = tmp / "t-line.yaml"
        lp.write_text(yaml.safe_dump(prof))
        d["link"] = {"candidates": [str(lp)], "max_lines": 1}
        fl["line"] = {"sku": "t-line", "count": 1}
    d["fleet"] = {"all": fl}
    p = tmp / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    return str(p)


@dataclass
class Compared:
    """Law and replay side by side: TTFT P50/P90/P99, KV transfer P50/P90/P99 (seconds; KV
    empty where nothing crosses a line), the KV transfer's means, and the plan and replay."""

    law: list[float]
    sim: list[float]
    kv_mean: tuple[float, float]
    plan: object
    res: object

    def errors(self) -> list[float]:
        return [a / s - 1 for a, s in zip(self.law, self.sim)]


def compare(tmp: Path, c: Case, decode_cap: float = 1.0, seed: int = 0) -> Compared:
    path = scenario(tmp, c)
    ctx = build_context(load_scenario(path), path)
    ctx, fleets = fleet.from_scenario(ctx)
    cls = build_classes(ctx.class_spec)
    fm = analytic.fleet_model(problem_of(ctx), fleets[c.arch], cls, Caps(decode=decode_cap))
    at = analytic.at_rate(fm, c.rate)
    assert at.ok, (c.name, at.limits)
    plan = at.plan
    res = run(ctx, plan, c.arch, c.n, seed)
    k = res.kept()
    law = [plan.ttft_s.p50, plan.ttft_s.p90, plan.ttft_s.p99]
    sim = [float(np.percentile(res.ttft_s[k], q)) for q in (50, 90, 99)]
    kv = res.kv_transfer_s[k]
    kv = kv[~np.isnan(kv)] if c.line is not None else kv[:0]
    kv_mean = (float("nan"), float("nan"))
    if kv.size:
        law += [plan.kv_transfer_s.p50, plan.kv_transfer_s.p90, plan.kv_transfer_s.p99]
        sim += [float(np.percentile(kv, q)) for q in (50, 90, 99)]
        kv_mean = (float(plan.kv_transfer_s.mean), float(kv.mean()))
    return Compared(law, sim, kv_mean, plan, res)
