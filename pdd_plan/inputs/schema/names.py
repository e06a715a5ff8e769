"""Names that must stay apart or name something: the lines a scenario may lease (one name,
one line, wherever a plan or fleet names it later), the datacenters (apart also once normalised
to the DNS labels the deployment files use), and the GPUs a price table names."""

import re


def dns_label(s: str) -> str:
    """A DNS-1123 label from any name: lower case, [a-z0-9-], no leading/trailing '-' (the
    Kubernetes names and file names `emit` writes)."""
    out = re.sub(r"[^a-z0-9-]+", "-", str(s).lower()).strip("-")
    return re.sub(r"-{2,}", "-", out) or "x"


def check_line_names(names: list[tuple[str, bool]]) -> None:
    """`names`: each candidate's name and whether it is inline. Two candidates with one name
    (an inline line named like a bundled one listed beside it, a bundled one listed twice)
    would be resolved as the first wherever a plan or fleet names its line: evaluate read a
    100 Gb/s inline `eth-10g` as the bundled 10 Gb/s one. An inline line may take a bundled
    name alone (on its `base` profile, say): then the name says that one line."""
    seen: dict[str, int] = {}
    for i, (name, inline) in enumerate(names):
        if name in seen:
            what = "an inline line named like" if inline else "named like"
            raise ValueError(
                f"link.candidates[{i}] is {what} candidates[{seen[name]}] ('{name}'): a plan "
                "names its line, so each candidate needs its own name"
            )
        seen[name] = i


def check_datacenter_names(names: list[str]) -> None:
    """Unique, and unique once normalised (`dc-a` and `DC_A` are one DNS label: emit would
    write both sites' files under one name)."""
    if len(set(names)) != len(names):
        raise ValueError("datacenter names must be unique")
    seen: dict[str, str] = {}
    for n in names:
        label = dns_label(n)
        if label in seen:
            raise ValueError(
                f"datacenters '{seen[label]}' and '{n}' are one name once normalised for the "
                f"deployment files ('{label}'): rename one"
            )
        seen[label] = n


def check_priced_gpus(
    prices: dict[str, float], on_demand: dict[str, float], datacenters: list[dict[str, int]]
) -> None:
    """Every GPU a price names is one some datacenter lists (else the price would be dropped
    silently, or a KeyError once the day planner looks it up)."""
    listed = sorted({g for gpus in datacenters for g in gpus})
    for table, field in ((prices, "prices"), (on_demand, "on_demand_prices")):
        for g in table:
            if g not in listed:
                raise ValueError(
                    f"{field}.{g}: a price for a GPU no datacenter lists (listed: "
                    f"{', '.join(listed) or 'none'}): remove it or add the GPU to a datacenter"
                )
