"""Hostile and careless input to the newer commands (evaluate, owned:, regimes, sweep, validate)
and the shipped examples: sizes bounded before work, internal errors turned into answers or
one-line errors, the real culprit named, names that cannot drive the terminal, ties that do not
deploy free instances for nothing. Each case here failed before the fix that it guards."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import yaml

from tests.cli_helpers import invoke, refused

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "benchmarks" / "scenarios" / "tiny.yaml"
FLEET = ROOT / "pdd_plan" / "data" / "examples" / "pdd-paper-fleet.yaml"
MOONCAKE = ROOT / "pdd_plan" / "data" / "examples" / "mooncake-conversation.yaml"


def tiny(**top) -> dict:
    d = yaml.safe_load(TINY.read_text(encoding="utf-8"))
    d.update(copy.deepcopy(top))
    return d


def write(tmp_path: Path, d: dict, name: str = "s.yaml") -> str:
    f = tmp_path / name
    f.write_text(yaml.safe_dump(d, sort_keys=False), encoding="utf-8")
    return str(f)


# ------------------------------------------------------------------ sizes, before work


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("evaluate", FLEET, "--requests", "1000000000000"), ("--requests", "PDD_PLAN_MAX_REQUESTS")),
        (("evaluate", FLEET, "--requests", "99"), ("--requests", ">= 100")),
        (("regimes", TINY, "--x", "rate_rps=1,2", "--y", "rtt_ms=1,2", "--sim-requests",
          "100000000000"), ("--sim-requests", "PDD_PLAN_MAX_REQUESTS")),
        (("sweep", TINY, "--vary", "workload.rate_rps=1:2:1e-300"),
         ("--vary workload.rate_rps", "1e+300 points")),  # not 300 digits
    ],
)  # fmt: skip
def test_sizes_are_refused_before_work(args, needle):
    refused(*args, needle=needle)


def test_a_fleet_past_the_plan_instances_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("PDD_PLAN_MAX_PLAN_INSTANCES", "5")
    refused("evaluate", FLEET, needle=("fleet.all.instances", "PDD_PLAN_MAX_PLAN_INSTANCES"))


def test_outputs_are_checked_after_the_scenario_is_read(tmp_path):
    f = tmp_path / "s.png"  # a scenario that happens to end in .png: YAML all the same
    f.write_text(TINY.read_text(encoding="utf-8"))
    before = f.read_bytes()
    refused("sweep", f, "--vary", "workload.rate_rps=10:20:10", "--plot", f,
            needle=("--plot", "input"))  # fmt: skip
    assert f.read_bytes() == before


# ------------------------------------------------------------------ owned at $0


def _all_owned(d: dict, scale: int = 1) -> dict:
    for dc in d["datacenters"]:
        dc["gpus"] = {g: n * scale for g, n in dc["gpus"].items()}
    d["owned"] = {
        "gpus": [
            {"datacenter": dc["name"], "gpu": g, "count": n, "cost_per_gpu_hour": 0.0}
            for dc in d["datacenters"]
            for g, n in dc["gpus"].items()
        ],
        "lines": [{"sku": s, "count": 2, "cost_per_month": 0.0} for s in d["link"]["candidates"]],
    }
    return d


def test_goodput_with_a_budget_and_everything_owned_at_zero_plans(tmp_path):
    d = _all_owned(tiny(objective="goodput", budget_per_hour=10, architectures=["idc_pd"]))
    del d["workload"]["rate_rps"]
    r = invoke("optimize", write(tmp_path, d), "--no-verify", "-f", "json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)["plans"]["idc_pd"]
    assert plan["cost_per_hour"] == 0.0 and plan["goodput_rps"] > 0


def _decode_instances(plan: dict) -> int:
    return sum(i["count"] for i in plan["instances"] if i["role"] != "prefill")


def test_free_instances_are_not_deployed_for_nothing(tmp_path):
    """At $0 every plan costs the same: the planner must take the one with the fewest
    instances, so it deploys no more decode instances than the plan at market prices does
    (which pays for each), and no more when four times the free GPUs are there."""
    runs = {}
    for name, d in (
        ("market", tiny(architectures=["pdd"])),
        ("free", _all_owned(tiny(architectures=["pdd"]))),
        ("free x4", _all_owned(tiny(architectures=["pdd"]), scale=4)),
    ):
        # --draws 0: the fleets are the planner's tie-break; the draws come after it
        f = write(tmp_path, d, f"{name}.yaml")
        r = invoke("optimize", f, "--no-verify", "--draws", "0", "-f", "json")
        assert r.exit_code == 0, r.output
        runs[name] = json.loads(r.stdout)["plans"]["pdd"]
    free, big = runs["free"], runs["free x4"]
    assert free["cost_per_hour"] == 0.0
    assert _decode_instances(free) <= _decode_instances(runs["market"])
    assert free["instances"] == big["instances"]
    share = free["route_share"]
    for g in free["instances"]:  # every deployed pool carries requests
        if g["role"] == "relay_decode":
            assert share["p_rld"] + share["p_rld_md"] > 0
        if g["role"] == "main_decode":
            assert share["p_md"] + share["p_rld_md"] > 0


# ------------------------------------------------------------------ the real culprit


def test_an_empty_datacenter_is_blamed_not_the_sla(tmp_path):
    d = tiny()
    d["datacenters"][0]["gpus"] = {"h100": 0}
    line = refused("optimize", write(tmp_path, d), "--no-verify", code=1,
                   needle=("datacenters[0].gpus", "dc-a", "lists no GPUs"))  # fmt: skip
    assert "sla.ttft" not in line


# ------------------------------------------------------------------ validate = optimize's checks


def _trace(tmp_path: Path, lines: list[str]) -> str:
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(f)


GOOD_ROW = '{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1]}'


@pytest.mark.parametrize(
    ("trace", "needle"),
    [
        (lambda p: "/dev/zero", ("/dev/zero", "not a regular file")),
        (lambda p: str(p / "missing.jsonl"), ("workload.trace", "not found")),
        (lambda p: _trace(p, [GOOD_ROW, '{"timestamp": 1, "input_length": -4}']), ("t.jsonl:2",)),
    ],
)
def test_validate_reads_the_trace_as_optimize_does(tmp_path, trace, needle):
    d = tiny()
    del d["workload"]["rate_rps"]
    d["workload"]["trace"] = trace(tmp_path)
    f = write(tmp_path, d)
    refused("validate", f, needle=needle)
    refused("optimize", f, "--no-verify", needle=needle)


def test_validate_checks_the_fleet_as_evaluate_does(tmp_path):
    d = yaml.safe_load(FLEET.read_text(encoding="utf-8"))
    d["fleet"]["all"]["instances"][0]["count"] = 60  # 60 x 16 H100 in a datacenter of 512
    f = write(tmp_path, d)
    refused("validate", f, needle=("fleet.all.instances[0]", "512"))
    refused("evaluate", f, needle=("fleet.all.instances[0]", "512"))


# ------------------------------------------------------------------ names and bins


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("dc\nb", "control character"),
        ("dc\x1b[31mred", "control character"),
    ],
)
def test_datacenter_names_must_be_printable(tmp_path, name, needle):
    d = tiny()
    d["datacenters"][0]["name"] = name
    line = refused("validate", write(tmp_path, d), needle=("datacenters[0].name", needle))
    assert "\x1b" not in line


def test_a_name_echoed_in_an_error_is_escaped(tmp_path):
    d = tiny()
    d["datacenters"][0]["gpus"] = {"h1\x1b[2J00": 4}
    line = refused("validate", write(tmp_path, d), needle=("\\x1b[2J",))
    assert "\x1b" not in line


@pytest.mark.parametrize(
    "bins",
    [
        [[0, 0.5, 0.5], [0.4, 1.0, 0.5]],  # 0.4..0.5 in both
        [[0.2, 0.8, 0.5], [0.0, 1.0, 0.5]],  # one inside the other
        [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]],  # the same point twice
    ],
)
def test_overlapping_hit_bins_are_refused(tmp_path, bins):
    d = tiny()
    d["workload"]["prefix_hit"] = {"histogram": bins}
    refused("validate", write(tmp_path, d), needle=("workload.prefix_hit", "overlap"))


def test_touching_hit_bins_are_fine(tmp_path):
    d = tiny()
    d["workload"]["prefix_hit"] = {"histogram": [[0, 0.5, 0.5], [0.5, 1.0, 0.25], [1, 1, 0.25]]}
    assert invoke("validate", write(tmp_path, d)).exit_code == 0


# ------------------------------------------------------------------ YAML aliases


def test_an_alias_bomb_under_a_field_names_the_anchor(tmp_path):
    rows = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    rows += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    text = TINY.read_text(encoding="utf-8").replace(
        "  classes: 8\n", "  classes: 8\n  x:\n" + "".join(f"    {r}\n" for r in rows)
    )
    f = tmp_path / "bomb.yaml"
    f.write_text(text, encoding="utf-8")
    refused("validate", f, needle=(str(f), "alias *a", "anchor &a", "defined on line"))


# ------------------------------------------------------------------ shipped examples


def test_the_mooncake_example_finds_its_trace_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the repository root
    r = invoke("validate", MOONCAKE)
    assert r.exit_code == 0, r.output
    trace = MOONCAKE.parent / "traces" / "mooncake_conversation_trace.jsonl"
    assert trace.is_file() and not trace.is_symlink()  # in the package itself
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"data/examples/traces/*.jsonl"' in text
    assert os.path.samefile(ROOT / "traces" / trace.name, trace)  # one copy
