"""Expert-parallel plans through emit: DeepEP modes, two-batch overlap and redundant experts
reach the plan's memory and the flags (unit side: tests/unit/emit/test_emit_moe.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pdd_plan import emit
from pdd_plan.emit.plan import EmitOptions
from pdd_plan.evaluate import fleet
from pdd_plan.outputs.plan import parse_plan
from tests.unit.emit.test_emit_moe import _fleet_ctx  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


FLEET = (
    Path(__file__).resolve().parents[2] / "pdd_plan" / "data" / "examples" / "pdd-paper-fleet.yaml"
)


@pytest.fixture(scope="module")
def plan(example_plan) -> dict:
    # the default scenario's unverified plan, planned once a session (conftest.py); a copy
    return copy.deepcopy(example_plan)


def _server_lines(p: dict, arch: str) -> dict[str, str]:
    dep = emit.build(parse_plan(p), arch, EmitOptions())
    files = {k: f.text for k, f in emit.render(dep, "sglang").items()}
    out = {}
    for text in files.values():
        for line in text.splitlines():
            if "sglang.launch_server" in line:
                mode = line.split("--disaggregation-mode ")[1].split()[0]
                out.setdefault(mode, line)
    return out


@pytest.mark.integration
def test_ep_plan_emits_deepep_modes_and_two_batch_overlap(plan):
    lines = _server_lines(plan, "pdd")
    assert "--moe-a2a-backend deepep --deepep-mode normal" in lines["prefill"]
    assert "--moe-a2a-backend deepep --deepep-mode low_latency" in lines["decode"]
    # DeepSeek-V4-Pro on 16 GPUs with EP16 and DP attention: the perf model overlaps two
    # micro-batches there (perf/instance.py tbo), so the server runs them too
    for line in lines.values():
        assert "--enable-two-batch-overlap" in line
        assert "--ep-num-redundant-experts" not in line


@pytest.mark.integration
def test_fleet_redundant_experts_reach_the_plan_memory_and_the_flags(plan):
    ctx, _ = _fleet_ctx(0)
    # the instance the fleet row describes: 16 more expert slots cost memory (one more
    # expert copy per GPU per MoE layer), so fewer KV tokens fit
    row = yaml.safe_load(FLEET.read_text())["fleet"]["all"]["instances"][0]
    row.update(tp=16, ep=16, dp=8)
    from pdd_plan.inputs.schema.fleet import FleetGroup

    a = fleet.instance(ctx.profiles, ctx.file, FleetGroup.model_validate(row), "f")
    b = fleet.instance(
        ctx.profiles, ctx.file, FleetGroup.model_validate({**row, "redundant_experts": 16}), "f"
    )
    assert b.expert_slots == a.expert_slots + 16
    assert b.kv_capacity_tokens < a.kv_capacity_tokens
    assert b.expert_imbalance < a.expert_imbalance  # EPLB balances the busiest rank
    # and an emitted row carries the flags (32 slots: EP 16 and EP 32 both divide 384 + 32)
    p = copy.deepcopy(plan)
    for r in p["plans"]["pdd"]["instances"]:
        r["redundant_experts"] = 32
    for line in _server_lines(p, "pdd").values():
        assert "--ep-num-redundant-experts 32 --enable-eplb" in line
    # the fleet's plan rows keep the setting (and the simulator rebuilds it from them)
    _, specs = _fleet_ctx(16)
    rows = specs["pdd"].instances
    assert len(rows) == 3 and all(r.redundant_experts == 16 for r in rows)
    assert "redundant_experts" not in _fleet_ctx(0)[1]["pdd"].instances[0].model_dump()


@pytest.mark.integration
def test_plan_row_with_redundant_experts_on_a_dense_model_names_the_row(tmp_path):
    from typer.testing import CliRunner

    from pdd_plan.cli.main import app

    tiny = Path(__file__).resolve().parents[2] / "benchmarks" / "scenarios" / "tiny.yaml"
    out = tmp_path / "plan.yaml"
    # --draws 0: the plan's fleet is what is edited; its uncertainty block is not read
    r = CliRunner().invoke(
        app, ["optimize", str(tiny), "--no-verify", "--draws", "0", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    d = yaml.safe_load(out.read_text())
    d["plans"]["pdd"]["instances"][0]["redundant_experts"] = 4
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(d))
    r = CliRunner().invoke(app, ["simulate", str(bad), "-n", "200"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    line = r.output.strip()
    assert "\n" not in line and "plans.pdd.instances[0].redundant_experts" in line
    assert "is dense" in line and str(bad) in line
