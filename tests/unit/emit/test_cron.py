"""The cron scaler's trigger metadata, checked where the KEDA CRD does not (emit/cron.py)."""

from __future__ import annotations

import pytest

from pdd_plan.emit import cron
from pdd_plan.emit.schedule import cron_at


@pytest.mark.unit
@pytest.mark.parametrize("expr", ["0 14 * * *", "50 13 * * *", "*/5 0-6 * * 1-5", "0,30 9 1 1 0"])
def test_good_cron_expressions_pass(expr):
    assert cron.cron_problems(expr) == []


@pytest.mark.unit
@pytest.mark.parametrize(
    ("expr", "word"),
    [
        ("0 14 * *", "4 fields"),
        ("60 14 * * *", "outside 0-59"),
        ("0 24 * * *", "outside 0-23"),
        ("0 9-3 * * *", "backwards"),
        ("0 */0 * * *", "step 0"),
        ("0 noon * * *", "not a number"),
        (1400, "not a cron expression"),
    ],
)
def test_bad_cron_expressions_are_named(expr, word):
    found = cron.cron_problems(expr)
    assert found and word in found[0], found


@pytest.mark.unit
def test_cron_at_wraps_the_day():
    assert cron_at(13 * 60 + 50) == "50 13 * * *"
    assert cron_at(-10) == "50 23 * * *"
    assert cron_at(1440 + 5) == "5 0 * * *"


@pytest.mark.unit
def test_a_trigger_without_its_fields_or_with_a_bad_timezone_is_named():
    doc = {
        "spec": {
            "triggers": [
                {"type": "cron", "metadata": {"timezone": "Moon/Base", "start": "0 1 * * *"}},
                {"type": "cpu", "metadata": {}},
            ]
        }
    }
    found = cron.trigger_problems(doc)
    assert any("lacks 'end'" in p for p in found)
    assert any("lacks 'desiredReplicas'" in p for p in found)
    assert any("Moon/Base" in p for p in found)
    assert all("triggers/0" in p for p in found)  # the cpu trigger is not the cron scaler's
