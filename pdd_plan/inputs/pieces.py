"""The typed pieces of a resolved scenario that the planning stages read.

The top stage of each command (``optimize()``, ``evaluate()``, ``simulate()``) reads the
:class:`~pdd_plan.inputs.context.Context` once and hands down only these: where the roles sit
and what each datacenter holds (`Sites`), the model, GPU and line profiles (`Profiles`), and
what a replay needs (`ReplaySetup`), and what the request classes are built from
(`ClassSpec`). The SLA, the policy and the search settings are the
scenario schema's own typed sections (`SLA`, `Policy`, `Search`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pdd_plan.architectures import Architecture, get
from pdd_plan.inputs.schema.engine import EngineLimits
from pdd_plan.inputs.schema.gpu import GPUProfile
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.inputs.schema.model import ModelProfile
from pdd_plan.inputs.schema.scenario import SLA, Policy, Workload


@dataclass(frozen=True)
class Sites:
    """Where each role sits and the GPUs each datacenter lists (in the scenario's order)."""

    prefill: str
    relay: str
    main: str
    gpus: dict[str, dict[str, int]]  # datacenter -> GPU type -> count
    main_decode_pinned: str | None = None  # placement.main_decode, when the scenario sets it

    def available(self, dc: str) -> dict[str, int]:
        return self.gpus[dc]

    def index(self, dc: str) -> int:
        """The datacenter's position in `datacenters[]` (0 when it is not listed)."""
        return next((i for i, d in enumerate(self.gpus) if d == dc), 0)

    def main_dcs(self, spec: Architecture) -> list[str]:
        """Where main decode may sit (the placement rule the optimizer enumerates and a plan's
        sites are checked against): by the prefill when the KV does not cross the line."""
        if not spec.crosses_line:
            return [self.prefill]
        if self.main_decode_pinned is not None:
            return [self.main_decode_pinned]
        others = [d for d in self.gpus if d != self.prefill]
        return others or [self.main]


@dataclass(frozen=True)
class Profiles:
    """The model, the GPU profiles (the scenario's prices applied) and the line SKUs."""

    model: ModelProfile
    gpus: dict[str, GPUProfile]
    lines: list[LineSKU]
    engine: EngineLimits | None = None  # the scenario's engine limits (None: the defaults)


@dataclass(frozen=True)
class ReplaySetup:
    """What the simulator reads besides the plan: the profiles, the SLA it checks, the policy
    it routes by, the prefill chunk, and where its requests come from."""

    profiles: Profiles
    sla: SLA
    policy: Policy
    prefill_chunk_tokens: int
    workload: Workload
    base_dir: Path  # relative trace paths are relative to the scenario file's folder
    file: str  # the scenario file, named in errors
    seed: int


@dataclass(frozen=True)
class ClassSpec:
    """What the request classes are built from: the workload, the policy (the MD-side hit
    ratio, DRC), the output length the classes split at, the seed, and where a trace lives."""

    workload: Workload
    policy: Policy
    # the policy's singular cap when some planned architecture finishes singular requests on
    # relay decode, else None (the classes are split at it)
    singular_split: int | None
    seed: int
    base_dir: Path  # relative trace paths are relative to the scenario file's folder
    file: str  # the scenario file, named in errors


def singular_split(policy: Policy, architecture_names: list[str]) -> int | None:
    """The output length the classes are split at: the policy's singular cap when one of the
    architectures lets singular requests finish on relay decode, else None."""
    lim = policy.singular_max_output_tokens
    if lim is None or not any(get(a).singular_on_relay for a in architecture_names):
        return None
    return int(lim)
