"""`pdd-plan emit`: every Kubernetes document validates strictly against the vendored CRD
schemas, every SGLang command line parses against the flag table, broken ones are caught, and
bad input is one line with exit code 2."""

from __future__ import annotations

import copy
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pdd_plan import emit
from pdd_plan.cli.common import dumps
from pdd_plan.emit import flags, k8s, sglang, validation
from pdd_plan.emit.plan import EmitOptions, nodes_for
from pdd_plan.inputs import profiles
from pdd_plan.outputs.plan import parse_plan
from tests.cli_helpers import err_line, invoke

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
K8S = ("lws", "rbg", "disaggregatedset")
CRD_KINDS = {"LeaderWorkerSet", "RoleBasedGroup", "DisaggregatedSet"}


def _row(role, gpu, dc, count, n, dp=None, ep=None):
    return {
        "role": role,
        "gpu": gpu,
        "datacenter": dc,
        "count": count,
        "gpus_per_instance": n,
        "tp": n,
        "dp": dp or n,
        "ep": ep or n,
        "cost_per_hour": 1.0,
    }


@pytest.fixture(scope="module")
def plan(example_plan) -> dict:
    # the default scenario's unverified plan, planned once a session (conftest.py); a copy
    return copy.deepcopy(example_plan)


@pytest.fixture(scope="module")
def relay_plan(plan) -> dict:
    """The default plan with a relay-decode pool next to prefill and a second main-decode GPU
    type (AMD), so every role, multi-type groups and amd.com/gpu are exercised."""
    p = copy.deepcopy(plan)
    pdd = p["plans"]["pdd"]  # one relay pool, this one (the default's own, if any, dropped)
    pdd["instances"] = [g for g in pdd["instances"] if g["role"] != "relay_decode"]
    pdd["instances"].append(_row("relay_decode", "h100", "dc-a", 2, 8))
    pdd["instances"].append(_row("main_decode", "mi300x", "dc-b", 1, 8))
    pdd["routing"] = {"relay_at_or_below_hit_rate": 0.6, "singular_max_output_tokens": 500}
    return p


@pytest.fixture(scope="module")
def plan_file(plan, tmp_path_factory) -> Path:
    f = tmp_path_factory.mktemp("plan") / "plan.yaml"
    f.write_text(dumps(plan, "yaml"))
    return f


def _render(p: dict, arch: str, target: str, **opts) -> dict[str, str]:
    dep = emit.build(parse_plan(p), arch, EmitOptions(**opts))
    return {k: f.text for k, f in emit.render(dep, target).items()}


def _docs(files: dict[str, str]) -> list[dict]:
    out = []
    for name, text in files.items():
        if name.endswith(".yaml") and name != "pdd-routing.yaml":
            out += [d for d in yaml.safe_load_all(text) if d is not None]
    return out


CASES = [(t, a) for t in K8S for a in ("pdd", "idc_pd")]


# ------------------------------------------------------------------ Kubernetes, strict schemas
@pytest.mark.parametrize("target,arch", CASES)
def test_every_k8s_document_validates_strictly(plan, target, arch) -> None:
    docs = _docs(_render(plan, arch, target))
    kinds = {d["kind"] for d in docs}
    assert kinds & CRD_KINDS, kinds
    assert {"Deployment", "Service"} <= kinds  # the router
    for d in docs:
        assert validation.known(d), d.get("kind")
        assert validation.validate(d) == [], (d["kind"], d["metadata"]["name"])


@pytest.mark.parametrize("target", K8S)
def test_relay_plan_validates_and_labels_relay(relay_plan, target) -> None:
    files = _render(relay_plan, "pdd", target)
    docs = _docs(files)
    for d in docs:
        assert validation.validate(d) == [], (d["kind"], d["metadata"]["name"])
    text = "\n".join(files.values())
    assert "pdd.role: relay_decode" in text
    assert "amd.com/gpu" in text and "nvidia.com/gpu" in text
    # the stock router sends to prefill and main decode only
    router = next(d for d in docs if d["kind"] == "Deployment")
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any("relay-decode" in a for a in args)
    rows = relay_plan["plans"]["pdd"]["instances"]
    n = {r: sum(x["count"] for x in rows if x["role"] == r) for r in ("prefill", "main_decode")}
    assert sum(a == "--prefill" for a in args) == n["prefill"]  # one per instance
    assert sum(a == "--decode" for a in args) == n["main_decode"]  # h200 + mi300x main decode
    if target == "disaggregatedset":  # both datacenters have two roles here
        ds = {d["metadata"]["name"]: d for d in docs if d["kind"] == "DisaggregatedSet"}
        assert [r["name"] for r in ds["pdd-dc-a"]["spec"]["roles"]] == ["prefill", "relay-decode"]
        assert len(ds["pdd-dc-b"]["spec"]["roles"]) == 2


def test_expected_kinds_per_target(plan, relay_plan) -> None:
    def kinds(p, arch, target):
        return sorted(d["kind"] for d in _docs(_render(p, arch, target)))

    # pdd without relay (the default's relay rows dropped): prefill and main decode
    plain = copy.deepcopy(plan)
    rows = plain["plans"]["pdd"]["instances"]
    plain["plans"]["pdd"]["instances"] = [g for g in rows if g["role"] != "relay_decode"]
    # pdd: one LWS per role and datacenter + router Deployment and Service
    assert kinds(plain, "pdd", "lws") == [
        "Deployment",
        "LeaderWorkerSet",
        "LeaderWorkerSet",
        "Service",
    ]
    # one RBG per datacenter
    assert kinds(plain, "pdd", "rbg").count("RoleBasedGroup") == 2
    assert kinds(plan, "idc_pd", "rbg").count("RoleBasedGroup") == 1
    # DisaggregatedSet needs >= 2 roles: idc_pd's single datacenter has prefill + decode
    k = kinds(plan, "idc_pd", "disaggregatedset")
    assert k.count("DisaggregatedSet") == 1 and "LeaderWorkerSet" not in k
    # pdd without relay: each datacenter has one role, so LWS stands in (README says so)
    files = _render(plain, "pdd", "disaggregatedset")
    assert "DisaggregatedSet" not in {d["kind"] for d in _docs(files)}
    assert "needs 2 to 10 roles" in files["README.md"]


def test_multinode_sizes_resources_and_selectors(plan) -> None:
    docs = _docs(_render(plan, "idc_pd", "lws"))
    inst = {r["role"]: r for r in plan["plans"]["idc_pd"]["instances"]}
    by_name = {d["metadata"]["name"]: d for d in docs}
    for role, name in (("prefill", "idc-pd-prefill"), ("decode", "idc-pd-decode")):
        row = inst[role]
        gpn = profiles.gpu(row["gpu"]).interconnect.gpus_per_node
        nodes = nodes_for(row["gpus_per_instance"], gpn)
        spec = by_name[name]["spec"]
        assert spec["replicas"] == row["count"]
        assert spec["leaderWorkerTemplate"]["size"] == nodes
        for tpl in ("leaderTemplate", "workerTemplate"):
            pod = spec["leaderWorkerTemplate"][tpl]["spec"]
            c = pod["containers"][0]
            assert c["resources"]["limits"]["nvidia.com/gpu"] == str(
                row["gpus_per_instance"] // nodes
            )
            assert c["resources"]["requests"] == c["resources"]["limits"]
            assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
            assert "--nnodes=$(LWS_GROUP_SIZE)" in c["args"]
            assert "--node-rank=$(LWS_WORKER_INDEX)" in c["args"]
        labels = spec["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]["labels"]
        assert labels["pdd.role"] == role and labels["pdd.datacenter"] == "dc-a"


def test_rbg_multinode_uses_rbg_env(plan) -> None:
    docs = _docs(_render(plan, "pdd", "rbg"))
    rbg = next(d for d in docs if d["kind"] == "RoleBasedGroup")
    role = rbg["spec"]["roles"][0]
    args = role["leaderWorkerPattern"]["template"]["spec"]["containers"][0]["args"]
    assert "--dist-init-addr=$(RBG_LWP_LEADER_ADDRESS):20102" in args
    router = next(d for d in docs if d["kind"] == "Deployment")
    rargs = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "http://pdd-dc-a-prefill-0.s-pdd-dc-a-prefill:30000" in rargs


# ------------------------------------------------------------------ broken documents are caught
def _first(docs, kind):
    return copy.deepcopy(next(d for d in docs if d["kind"] == kind))


def _pod_spec(doc):
    if doc["kind"] == "LeaderWorkerSet":
        return doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    if doc["kind"] == "DisaggregatedSet":
        return doc["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    if doc["kind"] == "RoleBasedGroup":
        r = doc["spec"]["roles"][0]
        pat = r.get("leaderWorkerPattern") or r["standalonePattern"]
        return pat["template"]["spec"]
    return doc["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    "target,kind",
    [
        ("lws", "LeaderWorkerSet"),
        ("rbg", "RoleBasedGroup"),
        ("disaggregatedset", "DisaggregatedSet"),
        ("lws", "Deployment"),
    ],
)
def test_unknown_field_is_caught_only_in_strict_mode(plan, target, kind) -> None:
    doc = _first(_docs(_render(plan, "idc_pd", target)), kind)
    _pod_spec(doc)["containers"][0]["imagePullPolcy"] = "Always"  # misspelled
    strict = validation.validate(doc)
    assert len(strict) == 1 and "imagePullPolcy" in strict[0]
    assert validation.validate(doc, strict_mode=False) == []  # the API server would prune it


@pytest.mark.parametrize("target", K8S)
def test_wrong_type_is_caught(plan, target) -> None:
    docs = _docs(_render(plan, "idc_pd", target))
    kind = {
        "lws": "LeaderWorkerSet",
        "rbg": "RoleBasedGroup",
        "disaggregatedset": "DisaggregatedSet",
    }[target]
    doc = _first(docs, kind)
    if kind == "LeaderWorkerSet":
        doc["spec"]["replicas"] = "2"
    elif kind == "RoleBasedGroup":
        doc["spec"]["roles"][0]["replicas"] = "2"
    else:
        doc["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["size"] = "2"
    errs = validation.validate(doc)
    assert len(errs) == 1 and "is not of type 'integer'" in errs[0]


def test_runtime_md_broken_lws_gives_three_errors(plan) -> None:
    doc = _first(_docs(_render(plan, "idc_pd", "lws")), "LeaderWorkerSet")
    doc["spec"]["replicas"] = "2"
    doc["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "Always"
    _pod_spec(doc)["containers"][0]["imagee"] = "x"
    assert len(validation.validate(doc)) == 3


def test_builtin_and_cel_checks(plan) -> None:
    docs = _docs(_render(plan, "idc_pd", "disaggregatedset"))
    svc = _first(docs, "Service")
    svc["spec"]["ports"][0]["port"] = "http"
    svc["spec"]["extra"] = 1
    assert len(validation.validate(svc)) == 2
    ds = _first(docs, "DisaggregatedSet")
    ds["spec"]["roles"][0]["spec"]["replicas"] = 0
    assert any("replicas must be zero" in e for e in validation.validate(ds))
    assert validation.validate({"apiVersion": "v1", "kind": "ConfigMap"})  # no schema: a problem


def test_check_reports_broken_files(plan, tmp_path) -> None:
    files = _render(plan, "idc_pd", "lws")
    name = "lws-dc-a.yaml"
    docs = list(yaml.safe_load_all(files[name]))
    docs[0]["spec"]["startupPolicy"] = "Eventually"
    files[name] = yaml.safe_dump_all(docs)
    files["launch-x.sh"] = "exec python -m sglang.launch_server --model-path m --tp 8\n"
    res = emit.check(files)
    assert len(res["problems"]) == 2
    assert any("Eventually" in p for p in res["problems"])
    assert any("unknown flag --tp" in p for p in res["problems"])


def test_vendored_schemas_and_package_data() -> None:
    d = validation.schema_dir()
    names = {p.name for p in d.iterdir()}
    assert "SOURCES.md" in names
    assert set(validation.SCHEMA_FILES.values()) <= names
    shared = ROOT.parent / "shared" / "schemas"
    if shared.is_dir():  # the vendored copies are byte-identical to the shared ones
        for f in shared.iterdir():
            assert (d / f.name).read_bytes() == f.read_bytes(), f.name
    text = (ROOT / "pyproject.toml").read_text()
    for glob in ("emit/schemas/*.json", "emit/schemas/*.md", "emit/data/*.yaml"):
        assert glob in text


# ------------------------------------------------------------------ SGLang command lines
def _all_argv(files: dict[str, str]) -> list[list[str]]:
    out = []
    for name, text in files.items():
        if name.endswith(".sh"):
            for line in text.splitlines():
                s = line.strip()
                if s.startswith("exec "):
                    out.append(shlex.split(s)[1:])
    return out


def _flag_names(argv: list[str]) -> list[str]:
    return [t.split("=", 1)[0] for t in argv[3:] if t.startswith("--")]


@pytest.mark.parametrize("arch", ["pdd", "cdc_pd", "idc_pd"])
def test_every_sglang_command_line_parses(plan, relay_plan, arch) -> None:
    for p in (plan, relay_plan) if arch == "pdd" else (plan,):
        files = _render(p, arch, "sglang")
        cmds = _all_argv(files)
        assert cmds
        table = flags.table()
        for argv in cmds:
            assert argv[:2] == ["python", "-m"]
            prog = argv[2]
            assert prog in ("sglang.launch_server", "sglang_router.launch_router")
            known = table[prog]["alias"]
            assert all(f in known for f in _flag_names(argv)), argv
            assert flags.check_argv(argv) == [], argv


def _by_host(script: str) -> dict[str, list[str]]:
    """host -> argv of an emitted launch script's case branches."""
    out, host = {}, None
    for line in script.splitlines():
        s = line.strip()
        if s.endswith(")") and s[:-1] and " " not in s and not s.startswith("*"):
            host = s[:-1]
        elif s.startswith("exec "):
            out[host] = shlex.split(s)[1:]
    return out


def test_server_flags_follow_plan_and_profiles(relay_plan) -> None:
    files = _render(relay_plan, "pdd", "sglang")
    hosts = {}
    for name, text in files.items():
        if name.endswith(".sh"):
            hosts.update(_by_host(text))
    cmds = {h: a for h, a in hosts.items() if a[2] == "sglang.launch_server"}
    rows = relay_plan["plans"]["pdd"]["instances"]
    expect = sum(r["count"] * nodes_for(r["gpus_per_instance"], 8) for r in rows)
    assert len(cmds) == expect  # one command per node of every instance

    def val(argv, flag):
        return argv[argv.index(flag) + 1]

    for h, a in cmds.items():
        role = h.split(".")[0].rsplit("-", 1)[0].split("-node")[0]
        mode = val(a, "--disaggregation-mode")
        assert mode == ("prefill" if h.startswith("prefill") else "decode")
        assert val(a, "--model-path") == "deepseek-ai/DeepSeek-V4-Pro"
        assert val(a, "--page-size") == "128"  # DeepSeek-V4 model profile
        assert "--tp" not in a and "--dp" not in a
        gpu = "mi300x" if "mi300x" in h else ("h200" if "main-decode" in h else "h100")
        assert val(a, "--mem-fraction-static") == f"{profiles.gpu(gpu).efficiency.mem_fraction:g}"
        assert ("--chunked-prefill-size" in a) == (mode == "prefill")
        if mode == "prefill":
            # the plan's 8192-token chunk is one DP-attention group's; SGLang divides the flag
            # by dp_size, so it is written times dp (8 x 8192 = 65536 on the default's prefill)
            dp = int(val(a, "--dp-size")) if "--dp-size" in a else 1
            assert int(val(a, "--chunked-prefill-size")) == 8192 * dp
        md = h.startswith("main-decode")
        assert ("--disaggregation-decode-enable-radix-cache" in a) == md, role
        # the default backend, NIXL over UCX, picks RDMA or TCP per peer: no ib device
        assert val(a, "--disaggregation-transfer-backend") == "nixl"
        assert "--disaggregation-ib-device" not in a
    # multi-node: 16-GPU prefill on 8-GPU nodes, node 1 joins node 0
    a0, a1 = cmds["prefill-0.dc-a.pdd.local"], cmds["prefill-0-node1.dc-a.pdd.local"]
    assert (val(a0, "--node-rank"), val(a1, "--node-rank")) == ("0", "1")
    assert val(a1, "--dist-init-addr") == "prefill-0.dc-a.pdd.local:20102"
    assert val(a1, "--nnodes") == "2"
    assert "--nnodes" not in cmds["relay-decode-0.dc-a.pdd.local"]  # 8 GPUs: one node
    assert "pdd.role=relay_decode" in files["launch-dc-a.sh"]


def test_router_command(plan) -> None:
    files = _render(plan, "pdd", "sglang")
    router = [a for a in _all_argv(files) if a[2] == "sglang_router.launch_router"]
    assert len(router) == 1
    r = router[0]
    assert "--pd-disaggregation" in r
    pre = [i for i, t in enumerate(r) if t == "--prefill"]
    n_pre = next(x["count"] for x in plan["plans"]["pdd"]["instances"] if x["role"] == "prefill")
    assert len(pre) == n_pre
    for i in pre:  # URL then the bootstrap port, always explicit
        assert r[i + 1].startswith("http://prefill-") and r[i + 1].endswith(".dc-a.pdd.local:30000")
        assert r[i + 2] == "8998"
    assert "http://main-decode-0.dc-b.pdd.local:30000" in r
    assert (
        "launch_router" in files["launch-dc-a.sh"]
        and "launch_router" not in files["launch-dc-b.sh"]
    )


def test_k8s_container_args_parse(plan, relay_plan) -> None:
    for p, arch in ((plan, "idc_pd"), (relay_plan, "pdd")):
        for target in K8S:
            res = emit.check(_render(p, arch, target))
            assert res["problems"] == []
            assert res["command_lines"] > 0 and res["documents"] > 0


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--tp", "8"], "unknown flag --tp"),
        (["--bogus-flag"], "unknown flag --bogus-flag"),
        (["--enable-dp-attention=true"], "takes no value"),
        (["--disaggregation-mode", "relay"], "expects one of"),
        (["--tp-size", "eight"], "expects an integer"),
        (["--mem-fraction-static", "1.5"], "must be <="),
        (["--dist-init-addr", "nohost"], "HOST:PORT"),
        (["--tp-size", "8", "--tp-size", "16"], "more than once"),
        (["--page-size"], "needs a value"),
    ],
)
def test_flag_table_rejects(extra, needle) -> None:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m", *extra]
    probs = flags.check_argv(argv)
    assert probs and any(needle in p for p in probs), probs


def test_flag_table_router_and_programs() -> None:
    ok = shlex.split(
        "python -m sglang_router.launch_router --pd-disaggregation --prefill http://p:30000 8998 "
        "--prefill http://q:30000 --decode http://d:30000 --policy cache_aware --port 8000"
    )
    assert flags.check_argv(ok) == []
    assert flags.check_argv(ok + ["--prefill", "http://p:30000", "port"])
    assert flags.check_argv(ok + ["--decode", "ftp://x"])
    assert flags.check_argv(["python", "-m", "sglang.launch_server", "--tp-size", "2"])  # no model
    assert flags.check_argv(["python", "-m", "vllm.entrypoints"])
    env = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path=m",
        "--node-rank=$(LWS_WORKER_INDEX)",
    ]
    assert flags.check_argv(env) == []
    assert "runtime.md" in flags.table()["source"]


# ------------------------------------------------------------------ routing file and README
def test_routing_file_and_readme(relay_plan) -> None:
    files = _render(relay_plan, "pdd", "sglang")
    r = yaml.safe_load(files["pdd-routing.yaml"])
    assert r["routing"]["relay_at_or_below_hit_rate"] == 0.6
    assert r["relay_max_tokens"] == relay_plan["inputs"]["policy"]["relay_max_tokens"]
    assert r["handoff"] == relay_plan["inputs"]["policy"]["handoff"]
    assert r["pools"]["relay_decode"] == [
        "http://relay-decode-0.dc-a.pdd.local:30000",
        "http://relay-decode-1.dc-a.pdd.local:30000",
    ]
    readme = files["README.md"]
    assert "no relay-decode role upstream" in readme
    assert "prefill-0.dc-a.pdd.local" in readme and "placeholder" in readme


_RENDER_ALL = """
import json, sys
from pdd_plan import emit
from pdd_plan.emit.plan import EmitOptions
from pdd_plan.outputs.plan import parse_plan
p = parse_plan(json.load(open(sys.argv[1])))
out = {}
for target in sys.argv[2:]:
    for k, f in emit.render(emit.build(p, "pdd", EmitOptions()), target).items():
        out[target + "/" + k] = f.text
sys.stdout.write(json.dumps(out))
"""


def test_render_is_deterministic_across_processes_and_hash_seeds(relay_plan, tmp_path) -> None:
    """Every target's files are the same bytes here and in a fresh interpreter with another
    string-hash seed (set and dict iteration orders of str keys differ between the two), on
    the plan with every role and a multi-type group."""
    src = tmp_path / "plan.json"
    src.write_text(json.dumps(relay_plan))
    targets = ("sglang", *K8S)
    here = {f"{t}/{k}": v for t in targets for k, v in _render(relay_plan, "pdd", t).items()}
    seed = "1" if os.environ.get("PYTHONHASHSEED") == "0" else "0"  # never this process's
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}
    r = subprocess.run(
        [sys.executable, "-c", _RENDER_ALL, str(src), *targets],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    there = json.loads(r.stdout)
    assert sorted(there) == sorted(here)
    for name, text in here.items():
        assert there[name] == text, f"{name} differs in a fresh interpreter"


def test_options(plan) -> None:
    files = _render(
        plan,
        "idc_pd",
        "sglang",
        model_path="/models/dsv4",
        transfer_backend="nixl",
        trust_remote_code=True,
    )
    argv = [a for a in _all_argv(files) if a[2] == "sglang.launch_server"][0]
    assert argv[argv.index("--model-path") + 1] == "/models/dsv4"
    assert "--trust-remote-code" in argv and "--disaggregation-ib-device" not in argv
    assert argv[argv.index("--disaggregation-transfer-backend") + 1] == "nixl"


# ------------------------------------------------------------------ CLI
@pytest.mark.parametrize("target", ["sglang", *K8S])
def test_cli_emit_check(plan_file, tmp_path, target) -> None:
    out = tmp_path / "out" / target
    r = invoke("emit", plan_file, "--target", target, "--out", out, "--check")
    assert r.exit_code == 0, r.output
    assert "check ok" in r.stdout
    names = sorted(n for n in os.listdir(out) if n != emit.MANIFEST)  # what emit wrote there
    assert "README.md" in names and "pdd-routing.yaml" in names
    assert not [n for n in names if n.startswith(".")]  # no temporary files left
    for n in names:
        mode = os.stat(out / n).st_mode
        assert bool(mode & 0o100) == n.endswith(".sh")


def test_cli_emit_architecture(plan_file, tmp_path) -> None:
    r = invoke("emit", plan_file, "-t", "lws", "-a", "idc_pd", "-o", tmp_path, "--model-path", "/m")
    assert r.exit_code == 0, r.output
    assert sorted(os.listdir(tmp_path)) == [
        emit.MANIFEST,
        "README.md",
        "lws-dc-a.yaml",
        "pdd-routing.yaml",
    ]
    assert "--model-path=/m" in (tmp_path / "lws-dc-a.yaml").read_text()


def test_cli_bad_input(plan_file, tmp_path) -> None:
    notplan = tmp_path / "notplan.yaml"
    notplan.write_text("name: x\nmodel: y\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("plans: [unclosed\n")
    cases = [
        ((tmp_path / "missing.yaml", "-t", "lws", "-o", tmp_path / "o"), "file not found"),
        ((notplan, "-t", "lws", "-o", tmp_path / "o"), "not a plan file"),
        ((broken, "-t", "lws", "-o", tmp_path / "o"), "YAML syntax error"),
        (
            (ROOT / "examples" / "pdd-paper.yaml", "-t", "lws", "-o", tmp_path / "o"),
            "not a plan file",
        ),
        ((plan_file, "-t", "helm", "-o", tmp_path / "o"), "unknown target 'helm'"),
        ((plan_file, "-t", "lws", "-a", "pd", "-o", tmp_path / "o"), "unknown architecture"),
        ((plan_file, "-t", "lws", "-o", plan_file), "not a folder"),
        ((plan_file, "-t", "lws", "-o", plan_file / "sub"), "cannot create the folder"),
        (
            (plan_file, "-t", "lws", "--transfer-backend", "tcp", "-o", tmp_path / "o"),
            "transfer backend",
        ),
    ]
    for args, needle in cases:
        r = invoke("emit", *args)
        assert r.exit_code == 2, (args, r.output)
        assert needle in err_line(r), (needle, r.output)
    assert not (tmp_path / "o").exists()  # nothing written on bad input


def test_cli_plan_without_architecture(plan, tmp_path) -> None:
    p = copy.deepcopy(plan)
    del p["plans"]["cdc_pd"]
    del p["schema_version"]  # a v1 plan: infeasible reasons were plain strings
    p["infeasible"] = {"cdc_pd": "TTFT P99 misses the SLA over the line"}
    f = tmp_path / "p.json"
    f.write_text(json.dumps(p))
    r = invoke("emit", f, "-t", "sglang", "-a", "cdc_pd", "-o", tmp_path / "o")
    assert r.exit_code == 2
    line = err_line(r)
    assert "has no 'cdc_pd'" in line and "infeasible: TTFT P99" in line


def test_k8s_names_are_dns_safe(relay_plan) -> None:
    import re

    for target in K8S:
        for d in _docs(_render(relay_plan, "pdd", target)):
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", d["metadata"]["name"])
            assert len(d["metadata"]["name"]) <= 63
    dep = emit.build(parse_plan(relay_plan), "pdd")
    assert [g.name for g in dep.groups_in("dc-b")] == ["main-decode-h200", "main-decode-mi300x"]
    assert k8s.instance_host(dep, "lws", dep.groups_in("dc-b")[0], 0).endswith(".dc-b.pdd.local")
    assert sglang.host(dep.groups_in("dc-a")[0], 0) == "prefill-0.dc-a.pdd.local"


def test_cli_check_fails_on_a_broken_emitter(plan_file, tmp_path, monkeypatch) -> None:
    real = emit.render

    def broken(dep, target):
        files = real(dep, target)
        name = next(n for n in files if n.startswith("lws-"))
        files[name] = emit.File(files[name].text.replace("startupPolicy:", "startupPolicyy:"))
        return files

    monkeypatch.setattr(emit, "render", broken)
    r = invoke("emit", plan_file, "-t", "lws", "-o", tmp_path, "--check")
    assert r.exit_code == 1
    err = r.stderr if hasattr(r, "stderr") else r.output
    assert "startupPolicyy" in err and "error: check failed" in err
