"""A fleet that already exists: the `fleet:` section of a scenario, which `pdd-plan evaluate`
measures (the highest request rate it serves within the SLA) instead of sizing one.

```yaml
fleet:
  all:                 # or per architecture (pdd, cdc_pd, idc_pd); an entry there wins
    instances:
      - {role: prefill, gpu: h100, datacenter: dc-a, count: 5, gpus_per_instance: 16}
      - {role: main_decode, gpu: h200, datacenter: dc-b, count: 1, gpus_per_instance: 16}
    line: {sku: eth-10g, count: 2}
    speed_factor: 1.0  # optional: the deployment's engine speed against the perf model
```

Each architecture runs the groups of its own roles (`all` may hold every role; CDC-PD on PDD's
fleet is PDD's fleet with every request sent P -> MD). `tp`/`dp`/`ep` default to the recipe the
optimizer uses for that instance size. Bounds match a plan's (outputs/plan.py), checked before
anything is allocated per instance.
"""

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from pdd_plan import architectures
from pdd_plan.inputs.schema.common import Strict

# the same bounds as a plan's (outputs/plan.py imports the scenario, so they are restated here;
# tests/unit/evaluate/test_evaluate.py keeps them equal)
MAX_INSTANCES_PER_GROUP = 100_000
MAX_GPUS_PER_INSTANCE = 4_096
MAX_REDUNDANT_EXPERTS = 4_096

ALL = "all"  # the fleet key every architecture without its own entry uses
MAX_GROUPS = 256  # instance groups per fleet: a hand-written file, not a generated one
# A deployment's engine speed over the perf model's (every forward pass takes 1/speed_factor
# of the modelled time). Bounded: below 1/100 no fleet meets a TPOT SLA, above 10x no engine
# option (MTP, kernels) is known to reach; outside that it is a typo.
MIN_SPEED_FACTOR = 0.01
MAX_SPEED_FACTOR = 10.0


class FleetGroup(Strict):
    """`count` identical instances of one role, GPU type and size in one datacenter."""

    role: Literal["prefill", "relay_decode", "main_decode", "decode"]
    """`prefill`, `relay_decode`, `main_decode` (PDD, CDC-PD) or `decode` (IDC-PD)."""
    gpu: str
    """GPU profile name."""
    datacenter: str
    """Datacenter the instances run in."""
    count: int = Field(ge=0, le=MAX_INSTANCES_PER_GROUP)
    """Instances in the group."""
    gpus_per_instance: int = Field(ge=1, le=MAX_GPUS_PER_INSTANCE)
    """GPUs per instance."""
    tp: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_INSTANCE)
    """Tensor parallelism (default: the optimizer's recipe for that size)."""
    dp: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_INSTANCE)  # None: the recipe's
    """Attention data parallelism (default: the recipe's)."""
    ep: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_INSTANCE)  # None: the recipe's
    """Expert parallelism (default: the recipe's)."""
    redundant_experts: int = Field(default=0, ge=0, le=MAX_REDUNDANT_EXPERTS)
    """Extra expert slots per layer (SGLang `--ep-num-redundant-experts` with EPLB)."""


class FleetLine(Strict):
    """The leased line(s) between the datacenters: a line SKU and how many."""

    sku: str
    """Line profile name."""
    count: int = Field(default=1, ge=1, le=MAX_INSTANCES_PER_GROUP)
    """Lines of that SKU."""


class ArchitectureFleet(Strict):
    instances: list[FleetGroup] = Field(min_length=1, max_length=MAX_GROUPS)
    """The fleet's instance groups."""
    line: FleetLine | None = None
    """The leased line, for architectures that cross it."""
    speed_factor: float = Field(default=1.0, ge=MIN_SPEED_FACTOR, le=MAX_SPEED_FACTOR)
    """The deployment's engine speed against the perf model: every pass takes 1/speed_factor of
    the model's time."""


def _known_keys(v: dict[str, ArchitectureFleet]) -> dict[str, ArchitectureFleet]:
    known = (ALL, *architectures.names())
    for k in v:
        if k not in known:
            raise ValueError(
                f"fleet key '{k}' is not '{ALL}' or an architecture ({', '.join(known)})"
            )
    if not v:
        raise ValueError(f"fleet needs '{ALL}' or at least one architecture")
    return v


# architecture name (or `all`) -> its fleet
Fleet = Annotated[dict[str, ArchitectureFleet], AfterValidator(_known_keys)]


def fleet_of(
    fleet: dict[str, ArchitectureFleet], architecture: str
) -> tuple[str, ArchitectureFleet] | None:
    """(key, fleet) an architecture runs on: its own entry, else `all`; None without either."""
    for key in (architecture, ALL):
        if key in fleet:
            return key, fleet[key]
    return None
