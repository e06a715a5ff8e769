"""No instance that sends or receives KV across the line is emitted with an RDMA-only transfer
backend, for every target; the connection and kernel settings of the line profile reach the
files."""

from __future__ import annotations

import copy
import json
import shlex

import pytest
import yaml

from pdd_plan import emit
from pdd_plan.emit import engines, transfer
from pdd_plan.emit.plan import EmitOptions
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.outputs.plan import parse_plan

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def plan(example_plan) -> dict:
    # the default scenario's unverified plan, planned once a session (conftest.py); a copy
    p = copy.deepcopy(example_plan)
    # a relay pool beside prefill, so the prefill -> relay hop inside dc-a is exercised
    row = dict(role="relay_decode", gpu="h100", datacenter="dc-a", count=2, gpus_per_instance=8)
    row.update(tp=8, dp=8, ep=8, cost_per_hour=1.0)
    p["plans"]["pdd"]["instances"].append(row)
    return p


def _deps(plan: dict, backend: str):
    for arch in ("pdd", "cdc_pd", "idc_pd"):
        yield emit.build(parse_plan(plan), arch, EmitOptions(transfer_backend=backend))


def _argvs(files: dict) -> list[tuple[list[str], list[dict]]]:
    """(argv, env) of every server command in launch scripts and Kubernetes containers."""
    out = []
    for name, f in files.items():
        text = str(f.text)
        if name.endswith(".sh"):
            lanes = [ln for ln in text.splitlines() if ln.startswith("export MC_TCP")]
            env = [{"name": ln.split()[1].split("=")[0]} for ln in lanes]
            out += [(a, env) for a in emit.sglang.commands_in_script(text)]
        elif name.endswith(".yaml") and name not in emit.NOT_K8S:
            for d in yaml.safe_load_all(text):
                for c, _ in emit._containers(d):
                    argv = [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]
                    for e in c.get("env") or []:  # KServe: the vLLM flags ride in the env
                        if e.get("name") == "VLLM_ADDITIONAL_ARGS":
                            argv += shlex.split(e["value"])
                    out.append((argv, c.get("env") or []))
    return out


def _val(argv: list[str], flag: str) -> str | None:
    for i, t in enumerate(argv):
        if t == flag:
            return argv[i + 1]
        if t.startswith(flag + "="):
            return t.split("=", 1)[1]
    return None


@pytest.mark.parametrize("backend", ["nixl", "mooncake"])
@pytest.mark.parametrize("target", ["sglang", "lws", "rbg", "disaggregatedset"])
def test_nothing_that_crosses_the_line_is_rdma_only(plan, target, backend) -> None:
    for dep in _deps(plan, backend):
        crossing = {g.name for g in dep.groups if transfer.crosses_line(dep, g)}
        assert crossing == (
            set() if dep.architecture == "idc_pd" else {g.name for g in dep.groups}
        )  # every PDD / CDC-PD pool has a KV peer in the other datacenter
        seen = 0
        for argv, env in _argvs(emit.render(dep, target)):
            b = _val(argv, "--disaggregation-transfer-backend")
            if b is None:
                continue
            seen += 1
            if dep.architecture == "idc_pd":
                assert b == backend  # nothing crosses: the user's choice stands
                continue
            assert not transfer.rdma_only(b)
            assert _val(argv, "--disaggregation-ib-device") is None
            if b == "mooncake_tcp":
                assert any(e["name"] == transfer.LANES_ENV for e in env)
        assert seen > 0


def test_line_settings_come_from_the_line_profile(plan) -> None:
    path = profiles.example_path()
    ctx = build_context(load_scenario(path), str(path))
    dep = emit.build(
        parse_plan(plan), "pdd", EmitOptions(transfer_backend="mooncake"), lines=ctx.lines
    )
    sku = plan["plans"]["pdd"]["line"]["sku"]
    prof = profiles.line(sku)
    s = dep.line_settings
    assert s.lanes_per_peer == prof.streams_per_transfer
    assert s.window_bytes == int(prof.max_window_bytes)
    files = emit.render(dep, "lws")
    env = [e for _, en in _argvs(files) for e in en if e["name"] == transfer.LANES_ENV]
    assert env and {e["value"] for e in env} == {str(prof.streams_per_transfer)}
    readme = str(files["README.md"].text)
    assert f"net.ipv4.tcp_wmem = 4096 16384 {int(prof.max_window_bytes)}" in readme
    idle = 0 if prof.slow_start == "first_use" else 1  # after_idle is Linux's default (1)
    assert f"net.ipv4.tcp_slow_start_after_idle = {idle}" in readme
    assert "prefill to relay decode" in readme  # its in-datacenter hop is TCP too
    # idc_pd: nothing crosses, no line section
    idc = emit.build(parse_plan(plan), "idc_pd", EmitOptions(), lines=ctx.lines)
    assert "Across the line" not in str(emit.render(idc, "sglang")["README.md"].text)


def test_line_settings_read_defensively() -> None:
    from pdd_plan.emit.plan import line_settings

    assert line_settings(None) is None
    s = line_settings({"name": "x", "lanes_per_peer": 8, "window_bytes": 1 << 20})
    assert (s.lanes_per_peer, s.window_bytes, s.slow_start) == (8, 1 << 20, None)
    assert transfer.kernel_lines(s) == [
        "net.ipv4.tcp_wmem = 4096 16384 1048576",
        "net.ipv4.tcp_rmem = 4096 131072 1048576",
    ]
    for mode, idle in (("every_transfer", 1), ("after_idle", 1), ("first_use", 0)):
        s = line_settings({"slow_start": mode})
        assert transfer.kernel_lines(s) == [f"net.ipv4.tcp_slow_start_after_idle = {idle}"]
    json.dumps(s.__dict__)


@pytest.mark.parametrize(
    "target,opts",
    [
        ("dynamo", {"engine": "sglang"}),
        ("dynamo", {"engine": "sglang", "transfer_backend": "mooncake"}),
        ("dynamo", {"engine": "vllm", "topology": "per-datacenter"}),
        ("dynamo", {"engine": "trtllm", "api_version": "v1alpha1"}),
        ("llm-d", {"transfer_backend": "mooncake"}),
        ("kserve", {}),
    ],
)
def test_new_targets_never_cross_the_line_on_rdma_only(plan, target, opts) -> None:
    p = copy.deepcopy(plan)
    if target == "kserve":  # one decode and one prefill workload: no relay pool
        p["plans"]["pdd"]["instances"] = [
            g for g in p["plans"]["pdd"]["instances"] if g["role"] != "relay_decode"
        ]
    for arch in ("pdd", "cdc_pd", "idc_pd"):
        dep = emit.build(parse_plan(p), arch, EmitOptions(**opts))
        seen = 0
        for argv, _env in _argvs(emit.render(dep, target)):
            b = engines.backend_of(argv)
            if b is None:
                continue
            seen += 1
            if arch != "idc_pd":  # every pool has a KV peer across the line
                assert not engines.rdma_only(b), (arch, argv[:3], b)
                assert _val(argv, "--disaggregation-ib-device") is None
        assert seen >= 2
