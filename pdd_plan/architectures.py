"""The serving architectures, each defined once: its roles, whether its KV crosses the line,
whether it may relay, and which request paths exist. Every module asks this spec rather than
comparing architecture names.

Paths: ``p_md`` (prefill -> KV transfer -> decode pool), ``p_rld_md`` (prefill -> RDMA -> relay
decode, handing off to main decode), ``p_rld`` (singular requests that finish on relay decode).
A new architecture is one `Architecture` entry passed to `register` (tests add a toy one).
"""

from __future__ import annotations

from dataclasses import dataclass

# the request paths; their names are plan-file keys (route shares), so they never change
P_MD = "p_md"  # prefill -> KV transfer -> decode pool
P_RLD_MD = "p_rld_md"  # prefill -> RDMA -> relay decode, handing off to main decode
P_RLD = "p_rld"  # singular requests that finish on relay decode
PATHS: tuple[str, ...] = (P_MD, P_RLD_MD, P_RLD)
RELAY_PATHS = (P_RLD_MD, P_RLD)
# whether a path's KV crosses the line (p_rld's never leaves relay decode's datacenter)
PATH_CROSSES_LINE: dict[str, bool] = {P_MD: True, P_RLD_MD: True, P_RLD: False}
ROLES: tuple[str, ...] = ("prefill", "relay_decode", "main_decode", "decode")
ROLE_ORDER = {r: i for i, r in enumerate(ROLES)}


@dataclass(frozen=True)
class Architecture:
    name: str
    title: str  # how reports name it (PDD, CDC-PD, IDC-PD)
    decode_role: str  # the pool every request's KV lands on: main_decode, or decode in A
    crosses_line: bool  # decode sits across the leased line (False: RDMA in one datacenter)
    paths: tuple[str, ...]  # request paths the router may use
    color: str = "#7f7f7f"  # plots
    marker: str = "o"

    def __post_init__(self) -> None:
        if self.decode_role not in ("main_decode", "decode"):
            raise ValueError(f"decode_role must be main_decode or decode, not {self.decode_role}")
        if P_MD not in self.paths or any(p not in PATHS for p in self.paths):
            raise ValueError(f"paths must include p_md and come from {PATHS}")
        if self.relays and not self.crosses_line:
            # relay decode exists to hide the line's transfer; without a line nothing to hide
            raise ValueError("a relay path needs an architecture that crosses the line")

    @property
    def relays(self) -> bool:
        """A relay-decode pool may be planned (some path ends or starts on it)."""
        return any(p in RELAY_PATHS for p in self.paths)

    @property
    def singular_on_relay(self) -> bool:
        """Short-output (singular) requests may finish on relay decode."""
        return P_RLD in self.paths

    @property
    def roles(self) -> tuple[str, ...]:
        return (
            ("prefill", "relay_decode", self.decode_role)
            if self.relays
            else (
                "prefill",
                self.decode_role,
            )
        )

    def rdma_peers(self, role: str, has_relay: bool) -> bool:
        """Whether an instance of `role` reaches all its KV peers over RDMA."""
        if not self.crosses_line:
            return True
        return role == "relay_decode" or (role == "prefill" and has_relay)


PDD = Architecture("pdd", "PDD", "main_decode", True, PATHS, "#1f77b4", "o")
CDC_PD = Architecture("cdc_pd", "CDC-PD", "main_decode", True, (P_MD,), "#ff7f0e", "s")
IDC_PD = Architecture("idc_pd", "IDC-PD", "decode", False, (P_MD,), "#2ca02c", "^")

# the reference architectures: PDD is compared against these two
RELAY_ARCH, LINE_BASELINE, LOCAL_BASELINE = "pdd", "cdc_pd", "idc_pd"

REGISTRY: dict[str, Architecture] = {a.name: a for a in (PDD, CDC_PD, IDC_PD)}


def register(arch: Architecture) -> Architecture:
    """Add an architecture (name must be new); returns it."""
    if arch.name in REGISTRY:
        raise ValueError(f"architecture '{arch.name}' is already registered")
    REGISTRY[arch.name] = arch
    return arch


def unregister(name: str) -> None:
    if name in (PDD.name, CDC_PD.name, IDC_PD.name):
        raise ValueError("the built-in architectures stay")
    REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get(name: str) -> Architecture:
    """The spec of `name`; KeyError with the known names otherwise (callers turn it into an
    InputError naming their field)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown architecture '{name}' (known: {', '.join(REGISTRY)})") from None
