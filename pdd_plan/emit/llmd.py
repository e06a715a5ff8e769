"""llm-d from a plan (deploy-targets.md §3-4): the model servers (DisaggregatedSet, as llm-d's
P/D guide deploys them), an InferencePool per pool (one accelerator type each, as GIE asks of
a pool) and the router's EndpointPickerConfig (``llm-d.ai/v1alpha1``, the version the EPP's
loader registers) with the P/D profiles and the router parameters the plan knows.

Seams, named in the README: an EPP serves one InferencePool, and llm-d's P/D handler picks the
prefill endpoint among that pool's endpoints; with prefill and decode in separate pools the
P/D EPP (the one the decode pool names) needs the prefill pool's endpoints too, which it does
not get across pools today. Relay decode has no llm-d role: its pool exists, its EPP gets no
P/D profile, and it idles until a router applies pdd-routing.yaml.
"""

from __future__ import annotations

from functools import lru_cache

import jsonschema
import yaml

from pdd_plan.emit import k8s
from pdd_plan.emit.plan import Deployment, Group, data_file, dns, label_value

POOL_API = "inference.networking.k8s.io/v1"
EPP_API = "llm-d.ai/v1alpha1"
EPP_PORT = 9002  # the EPP's gRPC port (deploy-targets.md §2, KServe's scheduler preset)
# the P/D guide's prefix matcher depth (LLMD@83bb7c18 pd-disaggregation.values.yaml)
MAX_PREFIX_TOKENS = 131072
EPP_FILE = "epp-config.yaml"


def pool_name(dep: Deployment, g: Group) -> str:
    return f"{dep.arch_dns}-{dns(g.datacenter)}-{g.name}"


def inference_pool(dep: Deployment, g: Group) -> dict:
    name = pool_name(dep, g)
    sel = {
        "pdd.architecture": label_value(dep.architecture),
        "pdd.datacenter": label_value(g.datacenter),
        "pdd.group": g.name,
    }
    return {
        "apiVersion": POOL_API,
        "kind": "InferencePool",
        "metadata": {"name": name, "labels": k8s.labels(dep, g)},
        "spec": {
            "selector": {"matchLabels": sel},
            "targetPorts": [{"number": dep.options.port}],
            "endpointPickerRef": {
                "name": f"{name}-epp",
                "port": {"number": EPP_PORT},
                "failureMode": "FailClose",
            },
        },
    }


def peak_prefill(dep: Deployment) -> int:
    """peakPrefillThroughput: prompt tokens/s of one prefill endpoint on full chunks (the
    slowest prefill group's, so the filter never assumes more than any endpoint does)."""
    rates = [g.peak_prefill_tps for g in dep.groups if g.role == "prefill"]
    return int(min(rates)) if rates else 0


def epp_config(dep: Deployment) -> dict:
    """The P/D EndpointPickerConfig: every request prefills remotely (the plan's P/D split),
    prefill picked by prefix affinity under the plan's peak prefill rate and token load,
    decode by active requests (the llm-d P/D guide's profiles, deploy-targets.md §3)."""
    plugins = [
        {"type": "always-disagg-pd-decider"},
        {
            "type": "disagg-profile-handler",
            "parameters": {"deciders": {"prefill": "always-disagg-pd-decider"}},
        },
        {"type": "prefill-filter"},
        {"type": "decode-filter"},
        {
            "type": "approx-prefix-cache-producer",
            "parameters": {"maxPrefixTokensToMatch": MAX_PREFIX_TOKENS},
        },
        {"type": "inflight-load-producer"},
        {
            "type": "prefix-cache-affinity-filter",
            "parameters": {"peakPrefillThroughput": peak_prefill(dep)},
        },
        {"type": "token-load-scorer"},
        {"type": "active-request-scorer"},
        {"type": "max-score-picker"},
    ]
    refs = ("prefill-filter", "prefix-cache-affinity-filter", "token-load-scorer")
    profiles = [
        {"name": "prefill", "plugins": [{"pluginRef": r} for r in (*refs, "max-score-picker")]},
        {
            "name": "decode",
            "plugins": [
                {"pluginRef": r}
                for r in ("decode-filter", "active-request-scorer", "max-score-picker")
            ],
        },
    ]
    return {
        "apiVersion": EPP_API,
        "kind": "EndpointPickerConfig",
        "plugins": plugins,
        "schedulingProfiles": profiles,
    }


def _servers(dep: Deployment, dc: str) -> list[dict]:
    """The model servers of one datacenter (the disaggregatedset target's documents) without
    the SGLang router and its per-instance Services: the EPP routes instead."""
    docs = k8s.documents(dep, "disaggregatedset", dc)
    return [d for d in docs if d["kind"] in ("DisaggregatedSet", "LeaderWorkerSet")]


def documents(dep: Deployment) -> dict[str, list[dict]]:
    out = {}
    for dc in dep.datacenters:
        pools = [inference_pool(dep, g) for g in dep.groups_in(dc)]
        out[f"llm-d-{dns(dc)}.yaml"] = _servers(dep, dc) + pools
    return out


def epp_yaml(dep: Deployment) -> str:
    head = (
        "# The P/D EPP's config (llm-d EndpointPickerConfig): give it to the EPP of the decode "
        "pool(s)\n# (llm-d router chart `--config-file`). See README.md.\n"
    )
    return head + yaml.safe_dump(epp_config(dep), sort_keys=False, width=1000)


# ------------------------------------------------------------------ checking
@lru_cache(maxsize=1)
def epp_schema() -> dict:
    raw = yaml.safe_load(data_file("endpointpickerconfig.schema.yaml").read_text(encoding="utf-8"))
    return raw["schema"]


def check_epp(doc: object) -> list[str]:
    """Problems of one EndpointPickerConfig: its schema (from the Go types), and every
    profile's pluginRef naming a defined plugin (a plugin's name defaults to its type)."""
    v = jsonschema.Draft202012Validator(epp_schema())
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        out.append(f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}")
    if out or not isinstance(doc, dict):
        return out
    names = [p.get("name") or p["type"] for p in doc["plugins"]]
    out += [f"plugins: name '{n}' defined twice" for n in sorted(set(names)) if names.count(n) > 1]
    for prof in doc["schedulingProfiles"]:
        for p in prof["plugins"]:
            if p["pluginRef"] not in names:
                out.append(f"schedulingProfiles/{prof['name']}: no plugin '{p['pluginRef']}'")
    return out
