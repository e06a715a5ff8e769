"""Kubernetes manifests per datacenter (runtime.md §2): LeaderWorkerSet per role, one
RoleBasedGroup (v1alpha2), or one DisaggregatedSet; the router as a Deployment and a Service.

Addresses the router uses (in the router's datacenter; another datacenter's names get the
placeholder suffix ``.<dc>.pdd.local``, to be mapped by the user's multi-cluster DNS):

* LWS: the leader pod through the LWS's headless service, ``<lws>-<i>.<lws>``;
* RBG: ``<rbg>-<role>-<i>.s-<rbg>-<role>`` (runtime.md §2.3);
* DisaggregatedSet: child LWS names carry a hash, so each instance gets a Service
  ``<arch>-<group>-<i>`` selecting its leader pod by the LWS group-index/worker-index labels.
"""

from __future__ import annotations

from pdd_plan.emit import transfer
from pdd_plan.emit.plan import DOMAIN, Deployment, Group, dns, label_value
from pdd_plan.emit.sglang import (
    STAGING_ENV,
    listen_flags,
    multinode_flags,
    router_flags,
    server_flags,
    tokens,
)

K8S_TARGETS = ("lws", "rbg", "disaggregatedset")
LWS_API = "leaderworkerset.x-k8s.io/v1"
RBG_API = "workloads.x-k8s.io/v1alpha2"
DS_API = "disaggregatedset.x-k8s.io/v1"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER = "leaderworkerset.sigs.k8s.io/worker-index"
SERVER_CMD = ["python3", "-m", "sglang.launch_server"]
ROUTER_CMD = ["python3", "-m", "sglang_router.launch_router"]

_MN_ENV = {
    "lws": ("$(LWS_LEADER_ADDRESS)", "$(LWS_GROUP_SIZE)", "$(LWS_WORKER_INDEX)"),
    "rbg": ("$(RBG_LWP_LEADER_ADDRESS)", "$(RBG_LWP_GROUP_SIZE)", "$(RBG_LWP_WORKER_INDEX)"),
}


def labels(
    dep: Deployment, g: Group | None, role: str | None = None, dc: str | None = None
) -> dict[str, str]:
    out = {
        "app.kubernetes.io/part-of": "pdd-plan",
        "pdd.architecture": label_value(dep.architecture),
    }
    if g is not None or role is not None:
        out["pdd.role"] = label_value(g.role if g else role)  # type: ignore[arg-type]
    out["pdd.datacenter"] = label_value(g.datacenter if g else (dc or dep.router_dc))
    if g is not None:
        out["pdd.group"] = g.name
        out["pdd.gpu"] = label_value(g.gpu)
        out["llm-d.ai/role"] = g.mode  # what llm-d's prefill-filter / decode-filter read
    return out


def obj_name(dep: Deployment, g: Group) -> str:
    return f"{dep.arch_dns}-{g.name}"


def _set_name(dep: Deployment, dc: str) -> str:
    return f"{dep.arch_dns}-{dns(dc)}"


# ------------------------------------------------------------------ addresses
def _remote(name: str, g: Group, router_dc: str) -> str:
    return name if g.datacenter == router_dc else f"{name}.{g.dc}.{DOMAIN}"


def uses_ds(dep: Deployment, dc: str) -> bool:
    """A DisaggregatedSet needs 2-10 roles; a datacenter with one role gets LWS instead."""
    return 2 <= len(dep.groups_in(dc)) <= 10


def instance_host(dep: Deployment, target: str, g: Group, i: int) -> str:
    if target == "rbg":
        rbg = _set_name(dep, g.datacenter)
        h = f"{rbg}-{g.name}-{i}.s-{rbg}-{g.name}"
    elif target == "disaggregatedset" and uses_ds(dep, g.datacenter):
        h = f"{obj_name(dep, g)}-{i}"
    else:
        n = obj_name(dep, g)
        h = f"{n}-{i}.{n}"
    return _remote(h, g, dep.router_dc)


def _url(dep: Deployment, target: str, g: Group, i: int) -> str:
    return f"http://{instance_host(dep, target, g, i)}:{dep.options.port}"


# ------------------------------------------------------------------ pods
def _container(dep: Deployment, g: Group, target: str, leader: bool) -> dict:
    o = dep.options
    f = server_flags(dep, g)
    if leader:
        f += listen_flags(dep)
    env: list[dict] = []
    if g.nodes > 1:
        kind = "rbg" if target == "rbg" else "lws"
        lead, size, rank = _MN_ENV[kind]
        f += multinode_flags(size, rank, lead, o.dist_port)
        if kind == "lws":  # explicit, for controllers that do not inject it (runtime.md §2.1)
            env.append(
                {
                    "name": "LWS_WORKER_INDEX",
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{LWS_WORKER}']"}},
                }
            )
    if dep.staging_buffer:
        env.append({"name": STAGING_ENV, "value": "1"})
    env += transfer.env(dep, g)
    n = str(g.gpus_per_node)
    c: dict = {
        "name": "sglang",
        "image": o.sglang_image,
        "command": list(SERVER_CMD),
        "args": tokens(f, eq=True),
    }
    if env:
        c["env"] = env
    if leader:
        ports = [{"containerPort": o.port, "name": "http"}]
        if g.role == "prefill":
            ports.append({"containerPort": o.bootstrap_port, "name": "bootstrap"})
        c["ports"] = ports
        c["readinessProbe"] = {
            "httpGet": {"path": "/health", "port": o.port},
            "initialDelaySeconds": 120,
            "periodSeconds": 10,
        }
    c["resources"] = {"limits": {g.resource: n}, "requests": {g.resource: n}}
    if transfer.sglang_backend(dep, g) != "mooncake_tcp":  # may register memory for RDMA
        c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    c["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return c


def _pod(dep: Deployment, g: Group, target: str, leader: bool) -> dict:
    lab = labels(dep, g)
    if leader:
        lab["role"] = "leader"
    elif g.nodes > 1:
        lab["role"] = "worker"
    return {
        "metadata": {"labels": lab},
        "spec": {
            "nodeSelector": {g.node_label: g.node_label_value},
            "containers": [_container(dep, g, target, leader)],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        },
    }


def _lws_spec(dep: Deployment, g: Group) -> dict:
    t: dict = {"size": g.nodes, "restartPolicy": "RecreateGroupOnPodRestart"}
    if g.nodes > 1:
        t["leaderTemplate"] = _pod(dep, g, "lws", leader=True)
        t["workerTemplate"] = _pod(dep, g, "lws", leader=False)
    else:
        t["workerTemplate"] = _pod(dep, g, "lws", leader=True)
    return {"replicas": g.count, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": t}


def lws(dep: Deployment, g: Group) -> dict:
    return {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": {"name": obj_name(dep, g), "labels": labels(dep, g)},
        "spec": _lws_spec(dep, g),
    }


def rbg(dep: Deployment, dc: str) -> dict:
    roles = []
    for g in dep.groups_in(dc):
        r: dict = {"name": g.name, "replicas": g.count, "labels": labels(dep, g)}
        if g.nodes > 1:
            r["leaderWorkerPattern"] = {"size": g.nodes, "template": _pod(dep, g, "rbg", True)}
            # workers run no HTTP server: no readiness probe, no ports
            tpl = r["leaderWorkerPattern"]["template"]
            for c in tpl["spec"]["containers"]:
                c.pop("readinessProbe", None)
            tpl["metadata"]["labels"].pop("role", None)
        else:
            r["standalonePattern"] = {"template": _pod(dep, g, "rbg", True)}
        roles.append(r)
    return {
        "apiVersion": RBG_API,
        "kind": "RoleBasedGroup",
        "metadata": {"name": _set_name(dep, dc), "labels": labels(dep, None, dc=dc)},
        "spec": {"roles": roles},
    }


def disaggregated_set(dep: Deployment, dc: str) -> dict:
    roles = []
    for g in dep.groups_in(dc):
        roles.append(
            {"name": g.name, "metadata": {"labels": labels(dep, g)}, "spec": _lws_spec(dep, g)}
        )
    return {
        "apiVersion": DS_API,
        "kind": "DisaggregatedSet",
        "metadata": {"name": _set_name(dep, dc), "labels": labels(dep, None, dc=dc)},
        "spec": {"slices": 1, "roles": roles},
    }


def instance_services(dep: Deployment, g: Group) -> list[dict]:
    """One Service per instance, selecting its leader pod (DisaggregatedSet addressing)."""
    o = dep.options
    out = []
    for i in range(g.count):
        sel = labels(dep, g)
        sel.pop("app.kubernetes.io/part-of")
        sel.update({LWS_GROUP: str(i), LWS_WORKER: "0"})
        ports = [{"name": "http", "port": o.port, "targetPort": o.port, "protocol": "TCP"}]
        if g.role == "prefill":
            ports.append(
                {
                    "name": "bootstrap",
                    "port": o.bootstrap_port,
                    "targetPort": o.bootstrap_port,
                    "protocol": "TCP",
                }
            )
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": f"{obj_name(dep, g)}-{i}", "labels": labels(dep, g)},
                "spec": {"type": "ClusterIP", "selector": sel, "ports": ports},
            }
        )
    return out


def router_args(dep: Deployment, target: str) -> list[str]:
    pre = [_url(dep, target, g, i) for g in dep.prefills() for i in range(g.count)]
    dec = [_url(dep, target, g, i) for g in dep.router_decodes() for i in range(g.count)]
    return tokens(router_flags(dep, pre, dec), eq=True)


def router(dep: Deployment, target: str) -> list[dict]:
    o = dep.options
    lab = labels(dep, None, "router")
    sel = {"pdd.architecture": lab["pdd.architecture"], "pdd.role": "router"}
    name = f"{dep.arch_dns}-router"
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": lab},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(sel)},
            "template": {
                "metadata": {"labels": dict(lab)},
                "spec": {
                    "containers": [
                        {
                            "name": "router",
                            "image": o.sglang_image,
                            "command": list(ROUTER_CMD),
                            "args": router_args(dep, target),
                            "ports": [{"containerPort": o.router_port, "name": "http"}],
                            "readinessProbe": {
                                "httpGet": {"path": "/health", "port": o.router_port},
                                "periodSeconds": 10,
                            },
                        }
                    ]
                },
            },
        },
    }
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": lab},
        "spec": {
            "type": "ClusterIP",
            "selector": dict(sel),
            "ports": [
                {
                    "name": "http",
                    "port": o.router_port,
                    "targetPort": o.router_port,
                    "protocol": "TCP",
                }
            ],
        },
    }
    return [deploy, svc]


def documents(dep: Deployment, target: str, dc: str) -> list[dict]:
    """All documents of one datacenter for one target."""
    if target not in K8S_TARGETS:
        raise ValueError(target)
    groups = dep.groups_in(dc)
    docs: list[dict] = []
    if target == "rbg":
        docs.append(rbg(dep, dc))
    elif target == "disaggregatedset" and uses_ds(dep, dc):
        docs.append(disaggregated_set(dep, dc))
        for g in groups:
            docs += instance_services(dep, g)
    else:
        docs += [lws(dep, g) for g in groups]
    if dc == dep.router_dc:
        docs += router(dep, target)
    return docs
