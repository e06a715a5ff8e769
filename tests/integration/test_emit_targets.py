"""`pdd-plan emit --target dynamo | llm-d | kserve`: for every bundled example that plans, every
document validates strictly against its vendored schema (DynamoGraphDeployment v1beta1 and
v1alpha1, InferencePool v1, LLMInferenceService v1alpha2; the EndpointPickerConfig and
pdd-routing.yaml against schemas written here), every engine command line parses against its
flag table with a world size equal to the instance's GPUs, and what a target cannot express is
refused in one line."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pdd_plan import emit
from pdd_plan.cli.common import dumps
from pdd_plan.cli.main import app
from pdd_plan.common.errors import InputError
from pdd_plan.emit import dynamo, engines, flags, kserve, llmd, routing, validation, yaml11
from pdd_plan.emit.plan import EmitOptions
from pdd_plan.emit.schedule import peak_plan
from pdd_plan.inputs import profiles
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.optimize import optimize
from pdd_plan.outputs.plan import parse_plan

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
# examples that plan (wan-microbench*: no plan meets them; they serve `line` and `perf`)
QUICK = ("pdd-paper", "narrow-line", "mooncake-conversation", "a-day", "pdd-paper-uncertain")
NO_PLAN = ("wan-microbench", "wan-microbench-narrow")


def _plan(example: str) -> dict:
    golden = GOLDEN / f"{example}.optimize.yaml"
    if golden.is_file():
        return yaml.safe_load(golden.read_text())
    path = profiles.example_path(example)
    return optimize(build_context(load_scenario(path), str(path)), verify=False).dump()


@pytest.fixture(scope="module")
def plans() -> dict[str, dict]:
    return {e: _plan(e) for e in QUICK}


@pytest.fixture(scope="module")
def relay_plan(plans) -> dict:
    """The default plan with a relay pool beside prefill and a second main-decode GPU (AMD)."""
    p = copy.deepcopy(plans["pdd-paper"])
    row = dict(gpus_per_instance=8, tp=8, dp=8, ep=8, cost_per_hour=1.0)
    pdd = p["plans"]["pdd"]  # one relay pool, this one (the default's own, if any, dropped)
    pdd["instances"] = [g for g in pdd["instances"] if g["role"] != "relay_decode"]
    p["plans"]["pdd"]["instances"] += [
        dict(role="relay_decode", gpu="h100", datacenter="dc-a", count=2, **row),
        dict(role="main_decode", gpu="mi300x", datacenter="dc-b", count=1, **row),
    ]
    p["plans"]["pdd"]["routing"] = {
        "relay_at_or_below_hit_rate": 0.6,
        "singular_max_output_tokens": 500,
    }
    return p


def _render(p: dict, arch: str, target: str, **opts) -> dict[str, str]:
    plan = peak_plan(parse_plan(p), arch)
    dep = emit.build(plan, arch, EmitOptions(**opts))
    return {k: str(f.text) for k, f in emit.render(dep, target).items()}


def _ok(files: dict[str, str]) -> dict:
    res = emit.check(files)
    assert res["problems"] == [], res["problems"][:5]
    return res


def _docs(files: dict[str, str], kind: str) -> list[dict]:
    out = []
    for name, text in files.items():
        if name.endswith(".yaml") and name not in emit.NOT_K8S:
            out += [d for d in yaml.safe_load_all(text) if d and d.get("kind") == kind]
    return out


def _label_maps(node: object):
    """Every label map of a pod (one with a `pdd.group`) under a document."""
    if isinstance(node, dict):
        if "pdd.group" in node:
            yield node
        for v in node.values():
            yield from _label_maps(v)
    elif isinstance(node, list):
        for v in node:
            yield from _label_maps(v)


def _archs(p: dict) -> list[str]:
    return [a for a in ("pdd", "cdc_pd", "idc_pd") if a in p["plans"]]


# ------------------------------------------------------------------ every bundled example
def test_bundled_examples_are_covered() -> None:
    assert set(QUICK) | set(NO_PLAN) | {"a-day-narrow-line", "pdd-paper-fleet"} == set(
        profiles.bundled_examples()
    )


@pytest.mark.parametrize("example", QUICK)
def test_every_example_validates_for_dynamo_and_llmd(plans, example) -> None:
    p = plans[example]
    for arch in _archs(p):
        for opts in (
            {},
            {"topology": "per-datacenter"},
            {"engine": "vllm", "api_version": "v1alpha1"},
            {"engine": "trtllm", "topology": "per-datacenter"},
        ):
            res = _ok(_render(p, arch, "dynamo", **opts))
            assert res["documents"] >= 1 and res["command_lines"] >= 2
        res = _ok(_render(p, arch, "llm-d"))
        assert res["documents"] >= 3


@pytest.mark.slow
def test_slow_example_validates_for_dynamo_and_llmd() -> None:
    p = _plan("a-day-narrow-line")
    for arch in _archs(p):
        _ok(_render(p, arch, "dynamo"))
        _ok(_render(p, arch, "dynamo", topology="per-datacenter"))
        _ok(_render(p, arch, "llm-d"))


def _fleet_plan(plans: dict) -> dict:
    """pdd-paper-fleet is an `evaluate` input (a fleet, not a plan; optimizing it is not its
    use): its fleets as the instances of the default plan, so its relay pool is emitted."""
    ex = yaml.safe_load(profiles.example_path("pdd-paper-fleet").read_text())
    p = copy.deepcopy(plans["pdd-paper"])

    def rows(fleet: list[dict]) -> list[dict]:
        n = "gpus_per_instance"
        return [dict(r, tp=r[n], dp=r[n], ep=r[n], cost_per_hour=1.0) for r in fleet]

    p["plans"]["pdd"]["instances"] = rows(ex["fleet"]["all"]["instances"])
    no_relay = [r for r in ex["fleet"]["all"]["instances"] if r["role"] != "relay_decode"]
    p["plans"]["cdc_pd"]["instances"] = rows(no_relay)
    p["plans"]["idc_pd"]["instances"] = rows(ex["fleet"]["idc_pd"]["instances"])
    return p


def test_fleet_example_validates_and_kserve_refuses_its_relay(plans) -> None:
    p = _fleet_plan(plans)
    for arch in _archs(p):
        _ok(_render(p, arch, "dynamo"))
        _ok(_render(p, arch, "dynamo", engine="trtllm", topology="per-datacenter"))
        _ok(_render(p, arch, "llm-d"))
    for arch in ("cdc_pd", "idc_pd"):
        _ok(_render(p, arch, "kserve"))
    with pytest.raises(InputError, match="relay-decode pool"):
        _render(p, "pdd", "kserve")


# ------------------------------------------------------------------ Dynamo
@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
@pytest.mark.parametrize("api", ["v1beta1", "v1alpha1"])
@pytest.mark.parametrize("topology", ["one-cluster", "per-datacenter"])
def test_dynamo_relay_plan(relay_plan, engine, api, topology) -> None:
    files = _render(relay_plan, "pdd", "dynamo", engine=engine, api_version=api, topology=topology)
    _ok(files)
    dgds = _docs(files, "DynamoGraphDeployment")
    assert all(d["apiVersion"] == f"nvidia.com/{api}" for d in dgds)
    assert all(d["spec"]["backendFramework"] == engine for d in dgds)
    if topology == "one-cluster":
        names = [d["metadata"]["name"] for d in dgds]
        assert names == ["pdd", "pdd-relay-decode"]  # the relay is outside the Frontend's DGD
        if api == "v1beta1":
            main = dgds[0]["spec"]
            pol = main["experimental"]["kvTransferPolicy"]
            assert pol["enforcement"] == "preferred" and 0 <= pol["preferredWeight"] <= 1
            types = sorted(c.get("type") for c in main["components"])
            assert types == ["decode", "decode", "frontend", "prefill"]  # h200 and mi300x
            for c in main["components"]:
                pod = c["podTemplate"]["spec"]
                assert [x["name"] for x in pod["containers"]] == ["main"]
                if c["type"] != "frontend":
                    assert dynamo.ZONE_LABEL in pod["nodeSelector"]
                    assert any("gpu.product" in k for k in pod["nodeSelector"])
    else:
        assert "pdd-ctrl" in [d["metadata"]["name"] for d in dgds]
        cfg = yaml.safe_load(_docs(files, "ConfigMap")[0]["data"][dynamo.ROUTER_CONFIG])
        assert cfg["num_prefill_pools"] == len(cfg["prefill_pool_dynamo_namespaces"]) == 1
        assert cfg["num_decode_pools"] == len(cfg["decode_pool_dynamo_namespaces"]) == 3


def test_dynamo_parallel_shape_per_engine(relay_plan) -> None:
    """16 GPUs with attention DP 8 and EP 16 (the default plan's prefill): SGLang tp 16 dp 8,
    vLLM tp 2 x dp 8 with expert parallel, TensorRT-LLM tp 16 with attention DP and EP 16; the
    world size equals nodeCount x GPUs per pod in each."""
    want = {
        "sglang": {"--tp-size": "16", "--dp-size": "8", "--ep-size": "16"},
        "vllm": {"--tensor-parallel-size": "2", "--data-parallel-size": "8"},
        "trtllm": {"--tensor-parallel-size": "16", "--expert-parallel-size": "16"},
    }
    for engine, flags_ in want.items():
        files = _render(relay_plan, "idc_pd", "dynamo", engine=engine)
        comps = _docs(files, "DynamoGraphDeployment")[0]["spec"]["components"]
        pre = next(c for c in comps if c.get("type") == "prefill")
        assert pre["multinode"] == {"nodeCount": 2}
        main = pre["podTemplate"]["spec"]["containers"][0]
        assert main["resources"]["limits"]["nvidia.com/gpu"] == "8"
        args = main["args"]
        for f, v in flags_.items():
            assert args[args.index(f) + 1] == v, (engine, f)
        assert main["command"] == ["python3", "-m", engines.DYNAMO_MODULE[engine]]


def test_dynamo_rules_outside_the_schema(relay_plan) -> None:
    files = _render(relay_plan, "idc_pd", "dynamo", image="registry/dynamo:latest")
    doc = _docs(files, "DynamoGraphDeployment")[0]
    assert all(c["runtimeVersionOverride"] == "1.4.0" for c in doc["spec"]["components"])
    assert validation.validate(doc) == []
    bad = copy.deepcopy(doc)
    del bad["spec"]["components"][0]["runtimeVersionOverride"]
    assert any("runtimeVersionOverride" in p for p in validation.validate(bad))
    bad["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]["name"] = "worker"
    assert any("container named main" in p for p in validation.validate(bad))
    assert not dynamo.needs_version_override("nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0")
    assert dynamo.needs_version_override("img@sha256:abc")


def test_yaml11_booleans_are_quoted_and_caught() -> None:
    text = yaml11.dump_all([{"env": [{"name": "A", "value": "y"}, {"name": "B", "value": "off"}]}])
    assert "'y'" in text and "'off'" in text and yaml11.unquoted(text) == []
    assert len(yaml11.unquoted("env: [{name: A, value: y}, {name: B, value: on}]")) == 2
    res = emit.check({"x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
    assert res["problems"] == []


# ------------------------------------------------------------------ llm-d
def test_llmd_pools_and_epp(relay_plan) -> None:
    files = _render(relay_plan, "pdd", "llm-d")
    _ok(files)
    pools = _docs(files, "InferencePool")
    assert len(pools) == 4  # prefill, relay, main decode h200, main decode mi300x
    for p in pools:
        sel = p["spec"]["selector"]["matchLabels"]
        assert {"pdd.group", "pdd.datacenter", "pdd.architecture"} <= set(sel)
    epp = yaml.safe_load(files[llmd.EPP_FILE])
    assert llmd.check_epp(epp) == []
    assert epp["apiVersion"] == "llm-d.ai/v1alpha1"
    assert [p["name"] for p in epp["schedulingProfiles"]] == ["prefill", "decode"]
    dep = emit.build(parse_plan(relay_plan), "pdd")
    pre = next(g for g in dep.groups if g.role == "prefill")
    aff = next(p for p in epp["plugins"] if p["type"] == "prefix-cache-affinity-filter")
    assert aff["parameters"]["peakPrefillThroughput"] == int(pre.peak_prefill_tps)
    # prefill time of one full chunk is positive and finite: a rate between 1e2 and 1e7 tok/s
    assert 1e2 < pre.peak_prefill_tps < 1e7
    # pods the pools select carry the role label llm-d's filters read
    pod_labels = list(_label_maps(_docs(files, "DisaggregatedSet")))
    assert pod_labels
    assert all(lab["llm-d.ai/role"] in ("prefill", "decode") for lab in pod_labels)


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: d.update(schedulingProfile=[]), "Additional properties"),
        (lambda d: d["plugins"][0].pop("type"), "'type' is a required property"),
        (lambda d: d["schedulingProfiles"][0]["plugins"].append({"pluginRef": "x"}), "no plugin"),
        (lambda d: d.update(apiVersion="llm-d.ai/v1"), "is not one of"),
        (lambda d: d["plugins"].append({"type": "decode-filter"}), "defined twice"),
    ],
)
def test_epp_schema_catches(relay_plan, mutate, needle) -> None:
    dep = emit.build(parse_plan(relay_plan), "pdd")
    d = llmd.epp_config(dep)
    mutate(d)
    probs = llmd.check_epp(d)
    assert probs and any(needle in p for p in probs), probs


# ------------------------------------------------------------------ KServe
@pytest.mark.parametrize("arch", ["cdc_pd", "idc_pd"])
def test_kserve_validates(plans, arch) -> None:
    files = _render(plans["pdd-paper"], arch, "kserve")
    _ok(files)
    (isvc,) = _docs(files, "LLMInferenceService")
    spec = isvc["spec"]
    p = parse_plan(plans["pdd-paper"]).plans[arch]
    dec = next(g for g in p.instances if g.role != "prefill" and g.count)
    pre = next(g for g in p.instances if g.role == "prefill" and g.count)
    assert spec["replicas"] == dec.count and spec["prefill"]["replicas"] == pre.count
    for w, g in ((spec, dec), (spec["prefill"], pre)):
        par = w["parallelism"]
        gpus_per_pod = int(w["template"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        pods = par.get("data", 1) // par.get("dataLocal", 1)
        assert par["tensor"] * par.get("data", 1) == g.gpus_per_instance == gpus_per_pod * pods
        assert ("worker" in w) == (pods > 1)


def test_kserve_refuses_a_relay_plan_in_one_line(relay_plan, tmp_path) -> None:
    dep = emit.build(parse_plan(relay_plan), "pdd")
    with pytest.raises(InputError, match="relay-decode pool"):
        emit.render(dep, "kserve")
    p = copy.deepcopy(relay_plan)  # the scenario's GPUs only (the CLI checks the sites)
    p["plans"]["pdd"]["instances"] = [
        g for g in p["plans"]["pdd"]["instances"] if g["gpu"] != "mi300x"
    ]
    f = tmp_path / "plan.yaml"
    f.write_text(dumps(p, "yaml"))
    r = CliRunner().invoke(app, ["emit", str(f), "-t", "kserve", "-o", str(tmp_path / "o")])
    assert r.exit_code == 2
    out = r.output.strip().splitlines()
    assert len(out) == 1 and "relay-decode pool" in out[0] and "Traceback" not in r.output
    assert not (tmp_path / "o").exists()  # nothing written


def test_kserve_webhook_rules() -> None:
    doc = {"spec": {"parallelism": {"tensor": 16}, "worker": {}, "prefill": {}}}
    assert ["spec: worker needs parallelism.data or parallelism.pipeline"] == (
        kserve.webhook_problems(doc)
    )
    doc = {"spec": {"parallelism": {"data": 2}, "worker": {}}}
    assert ["spec/parallelism: data and dataLocal go together"] == kserve.webhook_problems(doc)
    doc = {"spec": {"parallelism": {"data": 2, "dataLocal": 1, "pipeline": 2}}}
    assert len(kserve.webhook_problems(doc)) == 1


# ------------------------------------------------------------------ flag tables, versions
def test_flag_tables_per_engine() -> None:
    v = ["python3", "-m", "dynamo.vllm", "--model", "m", "--tensor-parallel-size", "2"]
    assert flags.check_argv(v + ["--data-parallel-size", "4"]) == []
    assert flags.check_gpus(v + ["--data-parallel-size", "4"], 8, 1) == []  # 2 x 4 = 8
    assert flags.check_gpus(v, 8, 1)  # 2 != 8
    assert flags.check_argv(v + ["--tp-size", "2"])  # SGLang's name is not vLLM's
    assert flags.check_argv(v + ["--kv-transfer-config", "{bad"])
    assert flags.check_argv(v + ["--disaggregation-mode", "relay"])
    t = ["python3", "-m", "dynamo.trtllm", "--model", "m", "--tensor-parallel-size", "8"]
    assert flags.check_argv(t + ["--enable-attention-dp", "--disaggregation-mode", "decode"]) == []
    assert flags.check_argv(t + ["--disaggregation-mode", "prefill_only"])
    assert flags.check_gpus(t + ["--pipeline-parallel-size", "2"], 8, 2) == []  # 8 x 2 = 2 x 8
    s = ["python3", "-m", "dynamo.sglang", "--model-path", "m", "--tp-size", "8"]
    assert flags.check_argv(s) == [] and flags.check_gpus(s, 8, 1) == []
    vers = flags.versions()
    assert set(vers) == {"sglang", "vllm", "trtllm"}
    for e in vers:
        assert "@" in flags.engine_source(e)  # a commit to read the flags at


def test_engine_version_and_engine_errors(relay_plan) -> None:
    with pytest.raises(InputError, match="no vllm flag table for version '0.1'"):
        _render(relay_plan, "pdd", "dynamo", engine="vllm", engine_version="0.1")
    ok = flags.versions()["vllm"]
    files = _render(relay_plan, "pdd", "dynamo", engine="vllm", engine_version=ok)
    _ok(files)
    assert ok in files["README.md"]
    with pytest.raises(InputError, match="runs sglang, not vllm"):
        _render(relay_plan, "pdd", "lws", engine="vllm")
    with pytest.raises(InputError, match="unknown engine"):
        EmitOptions(engine="tgi")
    with pytest.raises(InputError, match="unknown api version"):
        EmitOptions(api_version="v2")


# ------------------------------------------------------------------ pdd-routing.yaml
@pytest.mark.parametrize("target", ["sglang", "lws", "dynamo", "llm-d", "kserve"])
def test_routing_file_validates_and_round_trips(relay_plan, plans, target) -> None:
    src = plans["pdd-paper"] if target == "kserve" else relay_plan
    arch = "cdc_pd" if target == "kserve" else "pdd"
    files = _render(src, arch, target)
    doc = yaml.safe_load(files["pdd-routing.yaml"])
    assert routing.check(doc) == []
    plan = parse_plan(src).plans[arch]
    r, share = routing.plan_routing(doc)
    assert r == plan.routing and share == plan.route_share
    assert doc["target"] == target
    bad = copy.deepcopy(doc)
    bad["routing"]["relay_at_or_below_hit_rate"] = 1.5
    bad["pools"]["relay"] = []
    assert len(routing.check(bad)) == 2
    readme = files["README.md"]
    assert "decode-to-decode KV hand-off" in readme and "Closest existing features" in readme


def test_cli_new_targets(plans, tmp_path) -> None:
    f = tmp_path / "plan.yaml"
    f.write_text(dumps(plans["pdd-paper"], "yaml"))
    for target, extra in (
        ("dynamo", ["--engine", "vllm", "--dynamo-topology", "per-datacenter"]),
        ("llm-d", []),
        ("kserve", ["-a", "idc_pd"]),
    ):
        out = tmp_path / target
        r = CliRunner().invoke(
            app, ["emit", str(f), "-t", target, "-o", str(out), "--check", *extra]
        )
        assert r.exit_code == 0, r.output
        assert "check ok" in r.output
    r = CliRunner().invoke(
        app, ["emit", str(f), "-t", "dynamo", "-o", str(tmp_path / "x"), "--api-version", "v9"]
    )
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1


def test_older_engine_version_has_its_own_flags(relay_plan) -> None:
    """vLLM 0.7 (EngineArgs @001999d2) has no data or expert parallel flags: a plan with
    attention DP and EP is refused in one line naming them; a TP-only plan emits, and its flags
    check against the 0.7 table."""
    old = "0.7@001999d2"
    assert flags.available("vllm") == [flags.versions()["vllm"], old]
    sel = (("vllm", old),)
    argv = ["python3", "-m", "dynamo.vllm", "--model", "m", "--data-parallel-size", "2"]
    assert flags.check_argv(argv) == []
    assert any("unknown flag --data-parallel-size" in p for p in flags.check_argv(argv, sel))
    with pytest.raises(InputError, match=r"vllm 0\.7@001999d2 has no --data-parallel-size"):
        _render(relay_plan, "idc_pd", "dynamo", engine="vllm", engine_version=old)
    p = copy.deepcopy(relay_plan)
    for g in p["plans"]["idc_pd"]["instances"]:
        g.update(gpus_per_instance=8, tp=8, dp=1, ep=1)
    dep = emit.build(parse_plan(p), "idc_pd", EmitOptions(engine="vllm", engine_version=old))
    files = {k: str(f.text) for k, f in emit.render(dep, "dynamo").items()}
    assert emit.selection(dep, "dynamo") == sel
    res = emit.check(files, sel)
    assert res["problems"] == [] and res["command_lines"] == 2
    assert old in files["README.md"]
