"""A day in the scenario (issue 27): bad periods, timezones and elastic tables are one-line
errors naming the field and the fix; good ones parse."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pdd_plan.common.errors import InputError
from pdd_plan.inputs.schema import Scenario
from pdd_plan.inputs.schema.io import parse

ROOT = Path(__file__).resolve().parents[3]
DAY = yaml.safe_load((ROOT / "examples" / "a-day.yaml").read_text())


def _with(**edits) -> dict:
    d = copy.deepcopy(DAY)
    for path, v in edits.items():
        node, keys = d, path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = v
    return d


def _four(*spec) -> list[dict]:
    return [{"start_hour": s, "hours": h, "rate_multiplier": m} for s, h, m in spec]


def _error(d: dict) -> str:
    with pytest.raises(InputError) as e:
        parse(Scenario, d, "day.yaml")
    text = str(e.value)
    assert "\n" not in text and text.startswith("day.yaml"), text
    return text


@pytest.mark.unit
def test_the_example_day_parses_with_24_periods_covering_the_day():
    sc = parse(Scenario, copy.deepcopy(DAY), "day.yaml")
    assert len(sc.workload.periods) == 24
    assert sum(p.hours for p in sc.workload.periods) == 24
    assert sc.timezone == "Asia/Shanghai" and sc.elastic.startup_minutes == 10


@pytest.mark.unit
def test_a_period_may_wrap_past_midnight():
    d = _with(workload__periods=_four((22, 8, 0.5), (6, 16, 1.0)))
    assert len(parse(Scenario, d, "day.yaml").workload.periods) == 2


@pytest.mark.unit
@pytest.mark.parametrize(
    ("periods", "words"),
    [
        (_four((0, 8, 1), (6, 18, 1)), ("overlaps", "periods[0]", "periods[1]")),
        (_four((0, 6, 1), (8, 18, 1)), ("leaves a gap", "periods[0]")),
        (_four((0, -6, 1), (0, 30, 1)), ("hours must be > 0",)),
        (_four((0, 12, 0), (12, 12, 0)), ("every period's rate is 0",)),
        (_four((0, 12, 1), (12, 11, 1)), ("leaves a gap", "periods[1]")),
        (_four((0, 12, 1), (12, 36, 1)), ("48 h", "cover 24 h")),
        ([], ("empty",)),
    ],
)
def test_bad_periods_are_one_line_errors(periods, words):
    text = _error(_with(workload__periods=periods))
    for w in words:
        assert w in text, (w, text)


@pytest.mark.unit
def test_a_period_needs_exactly_one_rate():
    p = {"start_hour": 0, "hours": 24, "rate_rps": 3, "rate_multiplier": 1}
    assert "exactly one of rate_rps, rate_multiplier" in _error(_with(workload__periods=[p]))


@pytest.mark.unit
def test_a_multiplier_needs_the_workload_rate():
    d = _with(workload__periods=_four((0, 24, 1)))
    del d["workload"]["rate_rps"]
    assert "needs workload.rate_rps" in _error(d)


@pytest.mark.unit
@pytest.mark.parametrize("tz", ["Mars/Olympus", "/etc/localtime", "", "../UTC"])
def test_unknown_timezones_are_refused(tz):
    text = _error(_with(timezone=tz))
    assert "timezone" in text and "IANA" in text


@pytest.mark.unit
def test_elastic_names_known_datacenters():
    text = _error(_with(elastic__max_gpus={"dc-z": {"h100": 8}}))
    assert "unknown datacenter 'dc-z'" in text


@pytest.mark.unit
def test_elastic_without_periods_is_refused():
    d = _with()
    del d["workload"]["periods"]
    assert "need workload.periods" in _error(d)


@pytest.mark.unit
def test_the_period_count_is_limited(monkeypatch):
    monkeypatch.setenv("PDD_PLAN_MAX_PERIODS", "4")
    text = _error(_with())
    assert "24 periods is over the limit of 4" in text and "PDD_PLAN_MAX_PERIODS" in text


@pytest.mark.unit
def test_a_period_hit_rate_over_1_is_refused():
    p = _four((0, 24, 1))
    p[0]["prefix_hit"] = {"fixed": 1.5}
    assert "fractions in [0, 1]" in _error(_with(workload__periods=p))


@pytest.mark.unit
def test_periods_from_trace_needs_a_trace():
    d = _with(workload__periods_from_trace={"period_minutes": 5})
    del d["workload"]["periods"]
    assert "needs workload.trace" in _error(d)


@pytest.mark.unit
def test_a_free_day_scale_needs_the_bcr_objective_no_budget_and_a_day():
    assert "set objective bcr (not cost)" in _error(_with(day_scale="free", objective="cost"))
    assert "remove budget_per_hour" in _error(_with(day_scale="free", budget_per_hour=1000))
    d = _with(day_scale="free")
    del d["workload"]["periods"], d["elastic"]
    assert "day_scale free needs workload.periods" in _error(d)
    assert parse(Scenario, _with(day_scale="free"), "day.yaml").day_scale == "free"
    assert parse(Scenario, _with(), "day.yaml").day_scale == "fixed"  # the default: as given


@pytest.mark.unit
def test_the_default_day_scale_is_left_out_of_the_dumped_scenario():
    sc = parse(Scenario, _with(), "day.yaml")
    assert "day_scale" not in sc.model_dump(mode="json")
