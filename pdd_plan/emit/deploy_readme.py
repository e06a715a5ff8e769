"""README.md of the dynamo, llm-d and kserve targets: the files, the fleet, how each object
maps the plan, the seams the target cannot express, KV transfer, the relay rule, checking."""

from __future__ import annotations

from pdd_plan.emit import dynamo, engines, flags, kserve, llmd, routing, transfer
from pdd_plan.emit.plan import Deployment

KEEP = {
    "dynamo": "nvidia.com DynamoGraphDeployment",
    "llm-d": "llm-d model servers, InferencePools and EndpointPickerConfig",
    "kserve": "KServe LLMInferenceService",
}


def _fleet(dep: Deployment) -> list[str]:
    rows = [
        "| datacenter | role | instances | GPUs per instance | nodes x GPUs | tp / dp / ep "
        "| GPU node selector | peak prefill tok/s | KV capacity (tokens) |",
        "|---" * 9 + "|",
    ]
    for g in dep.groups:
        rows.append(
            f"| {g.datacenter} | {g.role} | {g.count} | {g.gpus_per_instance} x {g.gpu} | "
            f"{g.nodes} x {g.gpus_per_node} | {g.tp} / {g.dp} / {g.ep} | "
            f"`{g.node_label}={g.node_label_value}` | "
            + (f"{g.peak_prefill_tps:,.0f}" if g.role == "prefill" else "-")
            + " | "
            f"{g.kv_tokens:,.0f} |"
        )
    return rows


def _dynamo(dep: Deployment) -> list[str]:
    o = dep.options
    across = len(dep.datacenters) > 1
    eng = o.engine
    L = [
        f"Engine: {eng} (`python3 -m {engines.DYNAMO_MODULE[eng]}`), image "
        f"`{dynamo.image(dep, eng)}`, API `nvidia.com/{o.api_version}`. Every component's "
        "container is `main`; an image whose tag is not a semver gets `runtimeVersionOverride: "
        f"{dynamo.DYNAMO_VERSION}` (Dynamo's admission needs it); YAML 1.1 booleans are quoted. "
        "GPUs per pod = GPUs per node of the instance, `multinode.nodeCount` = nodes per instance "
        "(the operator adds the multi-node addresses); the GPU product is each worker's node "
        "selector. Apply with `envsubst < FILE | kubectl apply -n NAMESPACE -f -` "
        "(`${K8S_NAMESPACE}` names Dynamo namespaces, as Dynamo's examples do).",
    ]
    if not across:
        L += ["", "One datacenter: one DGD with the Frontend, prefill and decode components."]
    elif o.topology == "one-cluster":
        L += [
            "",
            "One Kubernetes cluster spans both datacenters (`--dynamo-topology one-cluster`): one "
            "DGD. Each worker is pinned to its datacenter by the node label "
            f"`{dynamo.ZONE_LABEL}=<datacenter>` (label your nodes so, or edit the selector). "
            "`kvTransferPolicy` is `preferred` (weight "
            f"{dynamo.PREFERRED_WEIGHT}), not `required`: required would fail every request, "
            "since no decode worker shares the prefill's datacenter; with no decode worker "
            "there, the preference never binds and prefill hands off across the line. "
            "`DYN_ROUTER_MODE=kv` is set on the Frontend, which the policy needs.",
        ]
    else:
        L += [
            "",
            "A cluster per datacenter (`--dynamo-topology per-datacenter`): Dynamo's multi-pool "
            "pattern. `dynamo-<router datacenter>.yaml` holds the control DGD (Frontend and "
            "GlobalRouter, its JSON config in a ConfigMap, default TTFT / ITL targets from the "
            "plan's SLA); each pool is its own DGD with a LocalRouter, applied in its "
            "datacenter's cluster. Seam: the Global Router reaches pools by Dynamo namespace "
            "through Dynamo's discovery plane, which Dynamo documents within one cluster; pools "
            "in another cluster need that plane shared across the clusters. The Global Router's "
            "grid selects a pool by input length and SLA target, not by the plan's rule: every "
            "cell maps to the first pool.",
        ]
    if any(g.role == "relay_decode" for g in dep.groups):
        L += [
            "",
            "Relay decode has no Dynamo role: its pool is its own DGD (its own Dynamo "
            "namespace), so the Frontend sends it no ordinary decode traffic; it idles until a "
            "router applies `pdd-routing.yaml`.",
        ]
    decs = [g for g in dep.groups if g.role in ("main_decode", "decode")]
    if len(decs) > 1 and (not across or o.topology == "one-cluster"):
        L += [
            "",
            f"The plan has {len(decs)} decode pools; one DGD holds them as separate decode "
            "components. Dynamo documents no rule for how its router splits traffic between them.",
        ]
    for n in engines.shape_notes(dep, eng):
        L += ["", f"Note: {n}."]
    return L


def _llmd(dep: Deployment) -> list[str]:
    return [
        "`llm-d-<datacenter>.yaml`: the model servers (the `disaggregatedset` target's "
        "DisaggregatedSet / LeaderWorkerSet, SGLang; pods labelled `llm-d.ai/role: "
        "prefill|decode` for llm-d's filters) and one InferencePool per pool, one accelerator "
        f"type each, selecting its pods by `pdd.group`, port {dep.options.port}, each naming its "
        f"EPP `<pool>-epp` on port {llmd.EPP_PORT}. Deploy each EPP with the llm-d router chart.",
        "",
        f"`{llmd.EPP_FILE}`: the P/D EndpointPickerConfig (`{llmd.EPP_API}`), checked against a "
        "schema written from its Go types (`pdd_plan/emit/data/endpointpickerconfig.schema.yaml`). "
        "Every request prefills remotely (`always-disagg-pd-decider`); prefill endpoints are "
        "filtered by prefix affinity with `peakPrefillThroughput` "
        f"{llmd.peak_prefill(dep):,} prompt tokens/s (the plan's perf model: one prefill "
        "instance on full chunks, no cached prefix) and scored by token load; decode by active "
        "requests. KV capacity per decode endpoint is in the fleet table; no EPP parameter takes "
        "it (the token-load scorer reads live load).",
        "",
        "Seam: an EPP serves one InferencePool, and llm-d's P/D handler picks the prefill "
        "endpoint among that pool's endpoints. Gateway API Inference Extension asks one "
        "accelerator type per pool, so prefill and decode on different GPUs are two pools, and "
        "the decode pool's P/D EPP does not see the prefill pool. Until an EPP can pick across "
        "pools, give the P/D EPP one InferencePool whose selector is `pdd.architecture: "
        f"{dep.architecture}` (both roles, mixed accelerators). The decode pods also need llm-d's "
        "routing sidecar (`ghcr.io/llm-d/llm-d-router-disagg-sidecar`, `--kv-connector=sglang`), "
        "which is not emitted here.",
    ]


def _kserve(dep: Deployment) -> list[str]:
    return [
        "`kserve.yaml`: one LLMInferenceService (`serving.kserve.io/v1alpha2`): the top-level "
        "workload is decode, `prefill` is prefill; vLLM, as KServe's presets run it. "
        "`parallelism` carries vLLM's shape (tensor = GPUs / DP, data / dataLocal, expert); "
        f"`{kserve.ARGS_ENV}` carries the rest of the plan's flags and the NIXL connector "
        "(producer on prefill, consumer on decode). `router.scheduler: {}` makes KServe create "
        "the InferencePool and llm-d's EPP with its own P/D config. Each role's GPU product is "
        "its node selector"
        + (
            f", and its datacenter `{kserve.ZONE_LABEL}`: one cluster spans both datacenters."
            if len(dep.datacenters) > 1
            else "."
        ),
        "",
        "KServe refuses (exit 2) a plan it cannot express: a relay-decode pool (a third "
        "workload), two GPU types in one role, or TP across nodes without data parallelism.",
    ]


def readme(dep: Deployment, target: str, files: list[str]) -> str:
    eng = "vllm" if target == "kserve" else dep.options.engine
    if target == "llm-d":
        eng = "sglang"
    L = [
        f"# {dep.scenario}: {dep.architecture} deployment ({target})",
        "",
        f"Generated by `pdd-plan emit --target {target} --architecture {dep.architecture}` from "
        f"a plan file: {KEEP[target]}. Model: `{dep.model_path}` ({dep.model.name}).",
        "",
        "## Files",
        "",
        *[f"- `{f}`" for f in files],
        "- `README.md` (this file)",
        "",
        "## Fleet",
        "",
        *_fleet(dep),
        "",
        f"## {target}",
        "",
    ]
    L += {"dynamo": _dynamo, "llm-d": _llmd, "kserve": _kserve}[target](dep)
    L += ["", *transfer.readme_section(dep, engine=eng), ""]
    L += [*routing.readme_section(dep, target), ""]
    for n in dep.notes:
        L += [f"Note: {n}.", ""]
    ver = engines.check_engine(eng, dep.options.engine_version)
    L += [
        "## Checking",
        "",
        f"`pdd-plan emit PLAN --target {target} --architecture {dep.architecture} --out DIR "
        "--check` re-reads the files: Kubernetes documents against the vendored CRD schemas "
        "(strict), the rules their schemas leave out, every engine command line against its "
        f"flag table ({eng} {ver}: {flags.engine_source(eng, ver)}), and "
        "`pdd-routing.yaml` against its schema.",
        "",
    ]
    return "\n".join(L)
