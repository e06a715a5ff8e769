"""The planner's inputs, in typed pieces: what each stage reads, built once by the top stage.

``optimize()`` reads the resolved scenario (the `Context`) and builds a :class:`Problem`; the
search drivers read it, and hand each stage only its pieces: the candidates stage the sites
and the `Catalog` (and the owned prices), the tables stage the SLA, policy and prefill chunk,
the MILP the tables alone, diagnosis the sites, SLA and catalog.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdd_plan.inputs.pieces import Sites
from pdd_plan.inputs.schema.engine import EngineLimits
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.scenario import SLA, Policy, Search
from pdd_plan.optimize.owned import OwnedPrices
from pdd_plan.perf.instance import Instance, parallelism_candidates


@dataclass(frozen=True)
class Catalog:
    """The instances the search may build: the model on each GPU type, at the sizes the search
    settings allow, prefilled in chunks of `prefill_chunk_tokens`."""

    model: ModelProfile
    gpus: dict[str, GPUProfile]
    max_gpus_per_instance: int
    parallelisms: int
    prefill_chunk_tokens: int
    engine: EngineLimits | None = None  # the scenario's engine limits (None: the defaults)

    @classmethod
    def of(
        cls,
        model: ModelProfile,
        gpus: dict[str, GPUProfile],
        search: Search,
        engine: EngineLimits | None = None,
    ) -> Catalog:
        return cls(
            model,
            gpus,
            search.max_gpus_per_instance,
            search.parallelisms,
            search.prefill_chunk_tokens,
            engine,
        )

    def instances(self, gpu: str) -> list[Instance]:
        return parallelism_candidates(
            self.model,
            self.gpus[gpu],
            self.max_gpus_per_instance,
            extra_sizes=self.parallelisms - 1,
            limits=self.engine,
        )


@dataclass(frozen=True)
class Problem:
    """One scenario's planning problem, as the search drivers (fixed_rate, free_rate,
    objectives, verify) read it. Not the scenario: no workload, architectures or seed (the top
    stage turns those into classes, a loop and a replay setup)."""

    sites: Sites
    catalog: Catalog
    lines: list[LineSKU]  # the link's candidate SKUs
    max_lines: int  # lines of one SKU at most (0: no link)
    sla: SLA
    policy: Policy
    search: Search
    owned: OwnedPrices
    objective: str
    budget_per_hour: float | None
    file: str  # the scenario file, named in errors

    @property
    def model(self) -> ModelProfile:
        return self.catalog.model
