"""Expert-parallel settings reach the deployment as the perf model assumed them (issue 12):
DeepEP normal kernels on prefill and low-latency on decode, two-batch overlap where the engine
default turns it on, and redundant expert slots (with EPLB) from a fleet that has them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdd_plan import emit
from pdd_plan.evaluate import fleet
from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema import Scenario

FLEET = (
    Path(__file__).resolve().parents[3] / "pdd_plan" / "data" / "examples" / "pdd-paper-fleet.yaml"
)


@pytest.mark.unit
def test_new_flags_pass_emit_check():
    # emit --check knows the flags (kinds: bool, int >= 0, bool) and refuses a bad count
    line = "exec python -m sglang.launch_server --model-path m --tp-size 16 --ep-size 16 "
    good = line + "--enable-two-batch-overlap --ep-num-redundant-experts 32 --enable-eplb\n"
    assert emit.check({"launch-x.sh": good})["problems"] == []
    bad = emit.check({"launch-x.sh": line + "--ep-num-redundant-experts -2\n"})["problems"]
    assert len(bad) == 1 and "--ep-num-redundant-experts" in bad[0]


def _fleet_ctx(redundant: int):
    d = yaml.safe_load(FLEET.read_text())
    for g in d["fleet"]["all"]["instances"]:
        g.update(tp=g["gpus_per_instance"], ep=g["gpus_per_instance"], dp=8)
        g["redundant_experts"] = redundant
    ctx = build_context(Scenario.model_validate(d), str(FLEET))
    return fleet.from_scenario(ctx)


@pytest.mark.unit
def test_redundant_experts_on_a_dense_model_or_bad_sizes_are_one_line_errors(tmp_path):
    from pdd_plan.common.errors import InputError
    from pdd_plan.inputs.schema.fleet import FleetGroup

    ctx, _ = _fleet_ctx(0)
    row = {"role": "prefill", "gpu": "h100", "datacenter": "dc-a", "count": 1}
    row.update(gpus_per_instance=16, tp=16, ep=16, dp=8)
    with pytest.raises(InputError, match="ep=16 does not divide 384 \\+ 8 redundant"):
        fleet.instance(
            ctx.profiles, ctx.file, FleetGroup.model_validate({**row, "redundant_experts": 8}), "f"
        )
    with pytest.raises(Exception, match="greater than or equal to 0"):
        FleetGroup.model_validate({**row, "redundant_experts": -1})
