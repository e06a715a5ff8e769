"""Validate Kubernetes documents offline against the vendored CRD schemas, in strict mode.

Strict mode (runtime.md §2.6): every object schema that lists ``properties`` and declares
neither ``additionalProperties`` nor ``x-kubernetes-preserve-unknown-fields`` gets
``additionalProperties: false``, so unknown (e.g. misspelled) fields are errors instead of being
pruned silently by the API server; ``metadata`` objects stay open. CEL rules
(``x-kubernetes-validations``) are not evaluated by jsonschema; the emitters keep the few that
apply (DisaggregatedSet: 2-10 roles, replicas all non-zero; RBG: one pattern per role).

Built-in kinds: the router's ``apps/v1 Deployment`` and ``v1 Service`` have no vendored schema;
they are checked against a partial strict schema written here (the fields the emitters use)
whose pod template is the LWS CRD's embedded ``PodTemplateSpec`` schema.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from pdd_plan.emit import cron
from pdd_plan.emit.dynamo import needs_version_override
from pdd_plan.emit.kserve import webhook_problems

SCHEMA_FILES = {
    (
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
    ): "leaderworkerset-leaderworkerset.x-k8s.io-v1.json",
    (
        "disaggregatedset.x-k8s.io/v1",
        "DisaggregatedSet",
    ): "disaggregatedset-disaggregatedset.x-k8s.io-v1.json",
    (
        "workloads.x-k8s.io/v1alpha1",
        "RoleBasedGroup",
    ): "rolebasedgroup-workloads.x-k8s.io-v1alpha1.json",
    (
        "workloads.x-k8s.io/v1alpha2",
        "RoleBasedGroup",
    ): "rolebasedgroup-workloads.x-k8s.io-v1alpha2.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject-keda.sh-v1alpha1.json",
    (
        "nvidia.com/v1alpha1",
        "DynamoGraphDeployment",
    ): "dynamographdeployment-nvidia.com-v1alpha1.json",
    (
        "nvidia.com/v1beta1",
        "DynamoGraphDeployment",
    ): "dynamographdeployment-nvidia.com-v1beta1.json",
    (
        "serving.kserve.io/v1alpha1",
        "LLMInferenceService",
    ): "llminferenceservice-serving.kserve.io-v1alpha1.json",
    (
        "serving.kserve.io/v1alpha2",
        "LLMInferenceService",
    ): "llminferenceservice-serving.kserve.io-v1alpha2.json",
    (
        "inference.networking.k8s.io/v1",
        "InferencePool",
    ): "inferencepool-inference.networking.k8s.io-v1.json",
    (
        "inference.networking.x-k8s.io/v1alpha2",
        "InferencePool",
    ): "inferencepool-inference.networking.x-k8s.io-v1alpha2.json",
    ("grove.io/v1alpha1", "PodCliqueSet"): "podcliqueset-grove.io-v1alpha1.json",
}
LWS_KEY = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


def schema_dir() -> Path:
    return Path(str(resources.files("pdd_plan") / "emit" / "schemas"))


def strict(schema: dict) -> dict:
    """A copy with additionalProperties: false wherever properties are given and unknown
    fields are not explicitly allowed (metadata objects excepted)."""
    s = copy.deepcopy(schema)

    def walk(node: object, key: str | None) -> None:
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
                and key != "metadata"
            ):
                node["additionalProperties"] = False
            for k, v in node.items():
                if k == "properties" and isinstance(v, dict):
                    for pk, pv in v.items():
                        walk(pv, pk)
                else:
                    walk(v, None)
        elif isinstance(node, list):
            for v in node:
                walk(v, None)

    walk(s, None)
    return s


@lru_cache(maxsize=32)
def crd_schema(api_version: str, kind: str, strict_mode: bool = True) -> dict:
    f = SCHEMA_FILES[(api_version, kind)]
    raw = json.loads((schema_dir() / f).read_text(encoding="utf-8"))
    return strict(raw) if strict_mode else raw


def _pod_template(strict_mode: bool) -> dict:
    lws = crd_schema(*LWS_KEY, strict_mode)
    return lws["properties"]["spec"]["properties"]["leaderWorkerTemplate"]["properties"][
        "workerTemplate"
    ]


def _labels() -> dict:
    return {"type": "object", "additionalProperties": {"type": "string"}}


def _meta() -> dict:
    return {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
            "namespace": {"type": "string"},
            "labels": _labels(),
            "annotations": _labels(),
        },
    }


def _int_or_str() -> dict:
    return {"anyOf": [{"type": "integer"}, {"type": "string"}]}


@lru_cache(maxsize=8)
def builtin_schema(kind: str, strict_mode: bool = True) -> dict:
    """Partial schemas of apps/v1 Deployment, v1 Service and v1 ConfigMap (fields from the
    Kubernetes API reference; only what the emitters use)."""
    if kind == "Deployment":
        s = {
            "type": "object",
            "required": ["apiVersion", "kind", "metadata", "spec"],
            "properties": {
                "apiVersion": {"const": "apps/v1"},
                "kind": {"const": "Deployment"},
                "metadata": _meta(),
                "spec": {
                    "type": "object",
                    "required": ["selector", "template"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0},
                        "selector": {
                            "type": "object",
                            "properties": {"matchLabels": _labels()},
                        },
                        "template": _pod_template(strict_mode),
                        "strategy": {"type": "object"},
                        "minReadySeconds": {"type": "integer"},
                        "revisionHistoryLimit": {"type": "integer"},
                    },
                },
            },
        }
    elif kind == "Service":
        port = {
            "type": "object",
            "required": ["port"],
            "properties": {
                "name": {"type": "string"},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "targetPort": _int_or_str(),
                "protocol": {"enum": ["TCP", "UDP", "SCTP"]},
                "appProtocol": {"type": "string"},
                "nodePort": {"type": "integer"},
            },
        }
        s = {
            "type": "object",
            "required": ["apiVersion", "kind", "metadata", "spec"],
            "properties": {
                "apiVersion": {"const": "v1"},
                "kind": {"const": "Service"},
                "metadata": _meta(),
                "spec": {
                    "type": "object",
                    "required": ["ports"],
                    "properties": {
                        "type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]},
                        "clusterIP": {"type": "string"},
                        "selector": _labels(),
                        "ports": {"type": "array", "minItems": 1, "items": port},
                        "publishNotReadyAddresses": {"type": "boolean"},
                        "sessionAffinity": {"enum": ["ClientIP", "None"]},
                    },
                },
            },
        }
    elif kind == "ConfigMap":
        s = {
            "type": "object",
            "required": ["apiVersion", "kind", "metadata"],
            "properties": {
                "apiVersion": {"const": "v1"},
                "kind": {"const": "ConfigMap"},
                "metadata": _meta(),
                "data": _labels(),
                "immutable": {"type": "boolean"},
            },
        }
    else:
        raise KeyError(kind)
    return strict(s) if strict_mode else s


BUILTIN = {("apps/v1", "Deployment"), ("v1", "Service"), ("v1", "ConfigMap")}


@lru_cache(maxsize=32)
def _validator(api_version: str, kind: str, strict_mode: bool):
    if (api_version, kind) in BUILTIN:
        s = builtin_schema(kind, strict_mode)
    else:
        s = crd_schema(api_version, kind, strict_mode)
    return jsonschema.Draft202012Validator(s)


def known(doc: object) -> bool:
    if not isinstance(doc, dict):
        return False
    key = (doc.get("apiVersion"), doc.get("kind"))
    return key in SCHEMA_FILES or key in BUILTIN


def validate(doc: object, strict_mode: bool = True) -> list[str]:
    """Problems with one document ('path: message'); empty when it validates."""
    if not isinstance(doc, dict):
        return ["document is not a mapping"]
    key = (doc.get("apiVersion"), doc.get("kind"))
    if not known(doc):
        return [f"no schema for apiVersion {key[0]!r} kind {key[1]!r}"]
    v = _validator(key[0], key[1], strict_mode)
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        path = "/".join(str(p) for p in e.absolute_path) or "(top)"
        out.append(f"{path}: {e.message}")
    out += _cel(doc)
    return out


def _cel(doc: dict) -> list[str]:
    """The CEL rules of the vendored CRDs that bear on what is emitted, checked by hand."""
    out = []
    spec: Any = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    if doc.get("kind") == "ScaledObject":  # the cron scaler's metadata: not in the CRD
        out += cron.trigger_problems(doc)
    if doc.get("kind") == "DisaggregatedSet":
        roles = [r for r in spec.get("roles") or [] if isinstance(r, dict)]
        fixed = [r for r in roles if (r.get("scaling") or {}).get("mode") != "External"]
        reps = [((r.get("spec") or {}).get("replicas")) for r in fixed]
        zero = all(not x for x in reps)
        nonzero = all(isinstance(x, int) and x > 0 for x in reps)
        if not (zero or nonzero):
            out.append(
                "spec/roles: replicas must be zero for all non-External roles or non-zero for all"
            )
    if doc.get("kind") == "DynamoGraphDeployment":
        out += dgd_rules(doc)
    if doc.get("kind") == "LLMInferenceService":
        out += webhook_problems(doc)
    if doc.get("kind") == "RoleBasedGroup":
        for i, r in enumerate(spec.get("roles") or []):
            if isinstance(r, dict):
                pats = [
                    p
                    for p in ("standalonePattern", "leaderWorkerPattern", "customComponentsPattern")
                    if p in r
                ]
                if len(pats) > 1:
                    out.append(f"spec/roles/{i}: {' and '.join(pats)} are mutually exclusive")
    return out


def dgd_rules(doc: dict) -> list[str]:
    """Dynamo's rules outside its CRD schema (deploy-targets.md §1): each v1beta1 component's
    pod has a container ``main`` with an image, and an image tag that is not a semver needs
    ``runtimeVersionOverride`` (admission)."""
    out = []
    spec: Any = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    for i, c in enumerate(spec.get("components") or []):
        if not isinstance(c, dict):
            continue
        pod = (c.get("podTemplate") or {}).get("spec") or {}
        main = [x for x in pod.get("containers") or [] if x.get("name") == "main"]
        where = f"spec/components/{i} ({c.get('name')})"
        if not main or not main[0].get("image"):
            out.append(f"{where}: needs a container named main with an image")
        elif needs_version_override(main[0]["image"]) and not c.get("runtimeVersionOverride"):
            out.append(f"{where}: image tag is not a semver: set runtimeVersionOverride")
    for name, c in (spec.get("services") or {}).items():
        img = ((c.get("extraPodSpec") or {}).get("mainContainer") or {}).get("image")
        if not img:
            out.append(f"spec/services/{name}: needs extraPodSpec.mainContainer.image")
    return out
