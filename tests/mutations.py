"""Mutating a scenario one field at a time, for the property tests (tests/integration/
test_mutation.py, test_validate_agrees.py): every key / index path of a document, and four
mutations at a path: drop it, replace its value by one of another type, rename its key by a
character, scale a number by a factor in [0, 3]."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def owned_scenario() -> dict:
    """The default scenario at 10 req/s with an `owned:` section (GPUs in both datacenters, a
    line), the bundled examples having none."""
    d = yaml.safe_load((EXAMPLES / "pdd-paper.yaml").read_text())
    d["workload"]["rate_rps"] = 10
    d["owned"] = {
        "gpus": [
            {"datacenter": "dc-a", "gpu": "h100", "count": 48, "cost_per_gpu_hour": 1.0},
            {"datacenter": "dc-b", "gpu": "h200", "count": 32, "cost_per_gpu_hour": 0.0},
        ],
        "lines": [{"sku": "shared-10g", "count": 1, "cost_per_month": 0.0}],
    }
    return d


def owned_day() -> dict:
    """The bundled day (a-day.yaml) at a 10 req/s peak with an `owned:` section: H100s sunk
    (the prefill datacenter's), H200s at an amortized price under the base one."""
    d = yaml.safe_load((EXAMPLES / "a-day.yaml").read_text())
    d["workload"]["rate_rps"] = 10  # the periods are multipliers of it
    d["architectures"] = ["pdd", "idc_pd"]  # each run ~2 s (cdc_pd is pdd without the relay)
    d["owned"] = {
        "gpus": [
            {"datacenter": "dc-a", "gpu": "h100", "count": 64, "cost_per_gpu_hour": 0.0},
            {"datacenter": "dc-b", "gpu": "h200", "count": 32, "cost_per_gpu_hour": 1.0},
        ]
    }
    return d


def example(name: str) -> dict:
    """A bundled example as a document, its rate lowered so each run stays about a second
    (`owned`, `a-day-owned`: the default and the day with an `owned:` section)."""
    if name == "owned":
        return owned_scenario()
    if name == "a-day-owned":
        return owned_day()
    d = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    if d["workload"].get("rate_rps") is not None and not d["workload"].get("periods"):
        d["workload"]["rate_rps"] = min(d["workload"]["rate_rps"], 10)
    return d


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key / index path in the document (containers and leaves), depth-first."""
    out: list[tuple] = []
    if isinstance(doc, dict):
        items = list(doc.items())
    elif isinstance(doc, list):
        items = list(enumerate(doc))
    else:
        return out
    for k, v in items:
        out.append((*prefix, k))
        out += paths(v, (*prefix, k))
    return out


def parent_of(doc: Any, path: tuple) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


def get(doc: Any, path: tuple) -> Any:
    return parent_of(doc, path)[path[-1]]


# ------------------------------------------------------------------ mutations

other_values = st.one_of(
    st.text(max_size=8),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.sampled_from(["a", "fixed", "name"]), st.integers(-2, 2), max_size=2),
    st.none(),
    st.booleans(),
    st.sampled_from([-1, -0.5, -1e9, 0, 0.0, 1e30, "", [], {}]),
)

mutation = st.one_of(
    st.tuples(st.just("drop"), st.integers(0, 10**6)),
    st.tuples(st.just("replace"), st.integers(0, 10**6), other_values),
    st.tuples(st.just("rename"), st.integers(0, 10**6), st.sampled_from(["append", "chop"])),
    st.tuples(st.just("scale"), st.integers(0, 10**6), st.floats(0.0, 3.0)),
)


def numeric_paths(doc: Any) -> list[tuple]:
    return [
        p
        for p in paths(doc)
        if isinstance(get(doc, p), int | float) and not isinstance(get(doc, p), bool)
    ]


def apply(doc: dict, m: tuple) -> str:
    """Apply one mutation in place; returns a description for failure reports."""
    kind, idx = m[0], m[1]
    if kind == "scale":
        numeric = numeric_paths(doc)
        if not numeric:
            return "scale: no numbers left"
        p = numeric[idx % len(numeric)]
        old = get(doc, p)
        new = old * m[2]
        if isinstance(old, int) and math.isfinite(new):
            new = round(new)
        parent_of(doc, p)[p[-1]] = new
        return f"scale {p}: {old!r} -> {new!r}"
    ps = paths(doc)
    if not ps:
        return f"{kind}: empty document"
    p = ps[idx % len(ps)]
    parent = parent_of(doc, p)
    if kind == "drop":
        del parent[p[-1]]
        return f"drop {p}"
    if kind == "replace":
        parent[p[-1]] = copy.deepcopy(m[2])
        return f"replace {p} by {m[2]!r}"
    # rename: only mapping keys have names
    if not isinstance(parent, dict):
        return f"rename {p}: not a key"
    key = str(p[-1])
    new_key = key + "x" if m[2] == "append" or len(key) < 2 else key[:-1]
    if new_key in parent:
        return f"rename {p}: {new_key!r} exists"
    parent[new_key] = parent.pop(p[-1])
    return f"rename {p} -> {new_key!r}"
