"""The day planner's typed inputs, built once by the top stage (`optimize()`): the planning
problem, the replay setup, the day's periods, and the scenario's elastic section, on-demand
prices, SLA scope, whether the profile's scale is free, and each period's elastic GPUs and workload (what its replay draws from)."""

from __future__ import annotations

from dataclasses import dataclass

from pdd_plan.inputs.pieces import ReplaySetup
from pdd_plan.inputs.schema.day import Elastic
from pdd_plan.inputs.schema.scenario import Scenario, Workload
from pdd_plan.optimize.problem import Problem
from pdd_plan.workload.periods import Day


@dataclass(frozen=True)
class DayProblem:
    pb: Problem
    replay: ReplaySetup
    day: Day
    elastic: Elastic | None
    on_demand: dict[str, float]  # $/GPU-hour of elastic GPUs per type
    sla_over: str
    timezone: str
    period_gpus: tuple[dict[str, dict[str, int]], ...]  # per period: elastic GPUs per site
    period_workloads: tuple[Workload, ...]  # per period: the workload its replay draws from
    free_scale: bool = False  # day_scale free: the profile's scale with the best day BCR

    @classmethod
    def of(cls, pb: Problem, replay: ReplaySetup, day: Day, sc: Scenario) -> DayProblem:
        w, el = sc.workload, sc.elastic
        own = {float(p.start_hour): p for p in w.periods or []}
        tables, loads = [], []
        for p in day.periods:
            src = own.get(p.start_hour)
            t = el.max_gpus if el is not None else {}
            if src is not None and src.elastic_max_gpus is not None:
                t = src.elastic_max_gpus
            tables.append(t)
            update: dict = {"periods": None, "periods_from_trace": None}
            update["rate_rps"] = max(p.rate_rps, 1e-3)
            for f in ("prefix_hit", "input_tokens", "output_tokens"):
                if src is not None and getattr(src, f) is not None:
                    update[f] = getattr(src, f)
            loads.append(w.model_copy(update=update))
        return cls(
            pb,
            replay,
            day,
            el,
            dict(sc.on_demand_prices),
            sc.sla.over,
            sc.timezone,
            tuple(tables),
            tuple(loads),
            sc.day_scale == "free",
        )

    def base_price(self, gpu: str) -> float:
        """$/GPU-hour of the base (the scenario's prices applied to the profile)."""
        return self.pb.catalog.gpus[gpu].price.usd_per_gpu_hour
