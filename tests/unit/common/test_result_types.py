"""Results flow forward: every type a planning, replay or evaluation stage returns is a frozen
dataclass or a frozen pydantic model, so no caller changes a result after it is returned (a
driver that adds to one builds a new value: `dataclasses.replace`, `model_copy`)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.unit

PKG = Path(__file__).resolve().parents[3] / "pdd_plan"

# module: the result types it defines (what a stage returns to the one above)
RESULT_TYPES = {
    "pdd_plan.optimize.solved": ("SolverResult",),
    "pdd_plan.optimize.milp.result": ("FleetSolution", "PointsSolution", "PointSolution"),
    "pdd_plan.optimize.day.search": ("DaySolved",),
    "pdd_plan.sim.result": ("SimResult",),
    "pdd_plan.sim.decode.io": ("DecodeResult",),
    "pdd_plan.sim.warmup": ("Truncation",),
    "pdd_plan.sim.verdict": ("Verdict", "Check", "EarlyStop"),
    "pdd_plan.evaluate.analytic": ("AtRate",),
    "pdd_plan.evaluate.verify": ("Replay", "VerifiedRates"),
    "pdd_plan.evaluate.result": ("Evaluation", "ArchitectureEvaluation", "GivesOut"),
    "pdd_plan.uncertainty.replay": ("Replayed",),
    "pdd_plan.uncertainty.robust": ("Robust",),
    "pdd_plan.outputs.plan": ("Plan", "ArchitecturePlan", "Simulated", "Infeasible"),
    "pdd_plan.outputs.day_plan": ("DayPlan", "PeriodReplay"),
}
# a class named like a result is one, wherever it is defined
RESULT_NAME = re.compile(
    r"(Result|Solution|Solved|Verdict|Evaluation|Replay|Replayed|Verified[A-Z]\w*)$"
)


def _frozen(cls: type) -> bool:
    if dataclasses.is_dataclass(cls):
        return cls.__dataclass_params__.frozen
    if issubclass(cls, BaseModel):
        return bool(cls.model_config.get("frozen"))
    return False


@pytest.mark.parametrize(
    "module,name", [(m, n) for m, names in RESULT_TYPES.items() for n in names]
)
def test_every_result_type_is_frozen(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert _frozen(cls), f"{module}.{name} is a result: make it frozen"


def _dataclasses_named_as_results() -> list[str]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and RESULT_NAME.search(node.name):
                mod = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
                out.append(f"{mod.removesuffix('.__init__')}:{node.name}")
    return out


def test_every_class_named_as_a_result_is_listed_and_frozen() -> None:
    listed = {f"{m}:{n}" for m, names in RESULT_TYPES.items() for n in names}
    found = _dataclasses_named_as_results()
    assert found, "the scan found no result class: it is broken"
    for qual in found:
        mod, name = qual.split(":")
        cls = getattr(importlib.import_module(mod), name)
        if not (dataclasses.is_dataclass(cls) or issubclass(cls, BaseModel)):
            continue  # an exception or a protocol named so, not a value
        assert qual in listed or _frozen(cls), f"{qual}: a result type, not frozen"


def test_no_escape_hatch_writes_a_frozen_field() -> None:
    # object.__setattr__ on a frozen instance would undo the gate above
    hits = [
        str(p.relative_to(PKG.parent))
        for p in sorted(PKG.rglob("*.py"))
        if "object.__setattr__" in p.read_text(encoding="utf-8")
    ]
    assert not hits, f"object.__setattr__ in {hits}"


def test_a_verdict_cannot_be_changed_after_it_is_returned() -> None:
    from pdd_plan.sim.verdict import Check, Verdict

    # 1.2 s against a 1.0 s target misses; 0.8 s meets (hand-made figures)
    miss, met = Check.of(1.2, 1.0), Check.of(0.8, 1.0)
    assert (miss.ok, met.ok, Check.of(None, 1.0).ok) == (False, True, False)
    v = Verdict(False, "line", {"ttft_p90": miss, "tpot_p90": met}, {}, {"requests": 10})
    assert v.failed_checks == ["ttft_p90"] and v.simulated("ttft_p90") == 1.2
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.sla_met = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        miss.ok = True  # type: ignore[misc]
    d = v.as_dict()
    assert d["requests"] == 10 and d["sla_met"] is False and d["bottleneck"] == "line"
    assert d["checks"]["ttft_p90"] == {"simulated": 1.2, "target": 1.0, "ok": False}
    assert "early_stop" not in d
    past = Verdict.unreplayed("prefill")
    assert not past.replayed and not past.sla_met and past.failed_checks == []
