"""pdd-routing.yaml: the plan's relay rule as data, for a PDD-aware router, with every target;
its JSON schema (data/pdd-routing.schema.yaml); and the README text that says what a router
must implement to apply it and what the closest existing features do."""

from __future__ import annotations

from functools import lru_cache

import jsonschema
import yaml

from pdd_plan.emit import dynamo, k8s, llmd
from pdd_plan.emit.plan import Deployment, Group, data_file
from pdd_plan.emit.sglang import host
from pdd_plan.outputs.plan import RouteShare, Routing

NEW_TARGETS = ("dynamo", "llm-d", "kserve")
HEAD = (
    "# PDD routing for a PDD-aware router (no open runtime applies it yet; see README.md).\n"
    "# Schema: pdd_plan/emit/data/pdd-routing.schema.yaml.\n"
    "# routing.relay_at_or_below_hit_rate: relay requests whose prefill-side prefix hit rate\n"
    "#   is at or below this (null: nothing relays); routing.singular_max_output_tokens:\n"
    "#   requests with at most this many output tokens may finish on the relay (p_rld);\n"
    "# relay_max_tokens: tokens the relay generates before handing off to main decode;\n"
    "# handoff: catch_up | one_shot.\n"
)


def _ref(dep: Deployment, target: str, g: Group) -> list[str]:
    """The pool's members as object references (the new targets have no stable addresses)."""
    if target == "dynamo":
        comp = dynamo.component_name(g)
        if dep.options.topology == "per-datacenter" and len(dep.datacenters) > 1:
            return [f"DynamoGraphDeployment/{dynamo.pool_name(dep, g)}/{comp}"]
        dgd = dep.arch_dns if g.role != "relay_decode" else f"{dep.arch_dns}-relay-decode"
        return [f"DynamoGraphDeployment/{dgd}/{comp}"]
    if target == "llm-d":
        return [f"InferencePool/{llmd.pool_name(dep, g)}"]
    return [f"LLMInferenceService/{dep.arch_dns}/{'prefill' if g.role == 'prefill' else 'decode'}"]


def pools(dep: Deployment, target: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {
        r: [] for r in ("prefill", "relay_decode", "main_decode", "decode")
    }
    for g in dep.groups:
        if target in NEW_TARGETS:
            out[g.role] += _ref(dep, target, g)
            continue
        for i in range(g.count):
            h = host(g, i) if target == "sglang" else k8s.instance_host(dep, target, g, i)
            out[g.role].append(f"http://{h}:{dep.options.port}")
    return out


def document(dep: Deployment, target: str) -> dict:
    pol = dep.policy
    return {
        "architecture": dep.architecture,
        "scenario": dep.scenario,
        "target": target,
        "upstream_support": (
            "none: no open runtime has a relay-decode role or a decode-to-decode KV hand-off; "
            "relay instances are plain decode instances labelled pdd.role=relay_decode, and "
            "applying this file needs a PDD-aware router"
        ),
        "routing": dep.routing,
        "relay_max_tokens": pol.get("relay_max_tokens"),
        "handoff": pol.get("handoff"),
        "drc": pol.get("drc"),
        "md_hit_ratio": pol.get("md_hit_ratio"),
        "route_share": dep.route_share,
        "sla": dep.sla,
        "line": dep.line,
        "bootstrap_port": dep.options.bootstrap_port,
        "pools": pools(dep, target),
    }


def routing_yaml(dep: Deployment, target: str) -> str:
    return HEAD + yaml.safe_dump(document(dep, target), sort_keys=False, width=1000)


@lru_cache(maxsize=1)
def schema() -> dict:
    raw = yaml.safe_load(data_file("pdd-routing.schema.yaml").read_text(encoding="utf-8"))
    return raw["schema"]


def check(doc: object) -> list[str]:
    v = jsonschema.Draft202012Validator(schema())
    errs = sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errs]


def plan_routing(doc: dict) -> tuple[Routing, RouteShare]:
    """The plan's typed routing and route shares, read back from a pdd-routing.yaml."""
    return Routing.model_validate(doc["routing"]), RouteShare.model_validate(doc["route_share"])


def readme_section(dep: Deployment, target: str, no_relay_note: bool = True) -> list[str]:
    """What a router must implement to apply pdd-routing.yaml, and the closest features."""
    r = dep.routing
    has_relay = any(g.role == "relay_decode" for g in dep.groups)
    L = ["## The relay rule (`pdd-routing.yaml`)", ""]
    hit = r.get("relay_at_or_below_hit_rate")
    L.append(
        "`pdd-routing.yaml` holds the plan's routing as data (schema: "
        "`pdd_plan/emit/data/pdd-routing.schema.yaml`): relay requests whose prefill-side "
        "prefix hit rate is at or below "
        + (f"`{hit}`" if hit is not None else "`null` (none relays)")
        + f"; those with at "
        f"most `{r.get('singular_max_output_tokens')}` output tokens finish on the relay; the "
        f"others generate `{dep.policy.get('relay_max_tokens')}` tokens there and hand off to "
        f"main decode (`{dep.policy.get('handoff')}`)."
    )
    L += [
        "",
        "To apply it a router must: (1) read each request's prefix hit rate at prefill and its "
        "expected output length; (2) send the request's KV to relay decode or main decode by "
        "the rule; (3) move a running request from relay decode to main decode: a "
        "decode-to-decode KV hand-off with the tokens generated so far. No open runtime has (3).",
        "",
        "Closest existing features: "
        + {
            "dynamo": "Dynamo's KV router scores decode workers by KV overlap and load, "
            "`kvTransferPolicy` prefers decode in the prefill's topology domain, and the Global "
            "Router picks a pool per request from a grid of input length and SLA target; none "
            "moves a running request between decode pools (its docs: decode retries across "
            "pools are not safe).",
            "llm-d": "llm-d's `prefix-based-pd-decider` skips remote prefill below a number of "
            "uncached tokens, and `label-selector-filter` restricts a profile to labelled pods; "
            "one EPP serves one InferencePool, and nothing moves a running request between "
            "decode pools.",
            "kserve": "KServe's router is llm-d's EPP (one InferencePool per service); the "
            "same limits apply.",
        }.get(
            target,
            "SGLang's router picks a decode worker per request by policy; it has no "
            "decode-to-decode hand-off.",
        ),
    ]
    if not has_relay and no_relay_note:
        L += ["", f"This plan ({dep.architecture}) has no relay pool: nothing relays."]
    return L
