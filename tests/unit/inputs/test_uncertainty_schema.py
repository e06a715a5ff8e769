"""The scenario's `uncertainty:` section: what it accepts and the one-line errors it gives."""

from __future__ import annotations

import pytest
import yaml

from pdd_plan.common.errors import InputError
from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema.io import parse
from pdd_plan.inputs.schema.scenario import Scenario
from pdd_plan.inputs.schema.uncertainty import kind

pytestmark = pytest.mark.unit


def _with(unc: dict) -> Scenario:
    d = yaml.safe_load(open(profiles.scenario_path(None)))
    d["uncertainty"] = unc
    return parse(Scenario, d, "s.yaml")


def _error(unc: dict) -> str:
    with pytest.raises(InputError) as e:
        _with(unc)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_defaults_and_a_full_entry():
    sc = _with({})
    assert sc.uncertainty.draws == 32 and sc.uncertainty.inputs.prefill_speed is None
    sc = _with(
        {
            "draws": 8,
            "seed": 3,
            "inputs": {
                "kv_bytes": {
                    "dist": "triangular",
                    "low": 0.8,
                    "mode": 1,
                    "high": 1.2,
                    "source": "assumption",
                }
            },
        }
    )
    assert sc.uncertainty.inputs.kv_bytes.mode == 1.0


def test_scenario_without_the_section_has_none():
    d = yaml.safe_load(open(profiles.scenario_path(None)))
    assert parse(Scenario, d, "s.yaml").uncertainty is None


# the audit's band of per-request compressor state (docs/kv-bytes.md)
U = {"dist": "uniform", "low": 0, "high": 18_710_528, "source": "docs/kv-bytes.md"}


def test_request_state_is_a_byte_count():
    s = _with({"inputs": {"request_state_bytes": U}}).uncertainty.inputs.request_state_bytes
    assert (s.low, s.high) == (0.0, 18_710_528.0)
    assert kind("request_state_bytes") == "bytes" and kind("kv_bytes") == "factor"


@pytest.mark.parametrize(
    "unc, words",
    [
        (
            {"inputs": {"kvbytes": {"dist": "normal", "mean": 1, "sd": 0.1, "source": "x"}}},
            ["uncertainty.inputs.kvbytes", "unknown key", "kv_bytes"],
        ),
        (
            {"inputs": {"kv_bytes": {"dist": "normal", "mean": 1, "sd": -0.1, "source": "x"}}},
            ["uncertainty.inputs.kv_bytes", "negative"],
        ),
        (
            {"inputs": {"rate": {"dist": "uniform", "low": 1.2, "high": 0.8, "source": "x"}}},
            ["uncertainty.inputs.rate", "negative spread"],
        ),
        (
            {"inputs": {"rate": {"dist": "uniform", "low": 0.8, "high": 1.2}}},
            ["uncertainty.inputs.rate.source"],
        ),
        (
            {"inputs": {"rate": {"dist": "normal", "low": 0.8, "sd": 1.2, "source": "x"}}},
            ["mean is missing"],
        ),
        ({"draws": 5000}, ["uncertainty.draws", "over the limit", "PDD_PLAN_MAX_DRAWS"]),
        (
            {"inputs": {"request_state_bytes": {**U, "low": -1}}},
            ["uncertainty.inputs.request_state_bytes", "low -1 is not a byte count"],
        ),
        (
            {"inputs": {"request_state_bytes": {**U, "high": 5e13}}},
            ["uncertainty.inputs.request_state_bytes", "high 5e+13", "0 to 1e+12 bytes"],
        ),
        (
            {
                "inputs": {
                    "request_state_bytes": {
                        "dist": "normal",
                        "mean": -2e6,
                        "sd": 1e6,
                        "source": "x",
                    }
                }
            },
            ["uncertainty.inputs.request_state_bytes", "mean -2e+06 is not a byte count"],
        ),
        (
            {"inputs": {"request_state_bytes": {**U, "low": 2e7, "high": 1e7}}},
            ["uncertainty.inputs.request_state_bytes", "negative spread"],
        ),
    ],
)
def test_bad_entries_are_one_line_errors(unc, words):
    msg = _error(unc)
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize(
    "spread, median",
    [
        (dict(dist="normal", mean=1.2, sd=0.3), 1.2),
        (dict(dist="lognormal", median=0.9, sigma=0.4), 0.9),
        (dict(dist="uniform", low=0.8, high=1.0), 0.9),
        # triangular 0..1 with mode 1: F(x) = x^2, so the median is sqrt(1/2)
        (dict(dist="triangular", low=0.0, mode=1.0, high=1.0), 0.5**0.5),
        # and mirrored: mode 0, F(x) = 1 - (1 - x)^2, median 1 - sqrt(1/2)
        (dict(dist="triangular", low=0.0, mode=0.0, high=1.0), 1 - 0.5**0.5),
    ],
)
def test_a_spreads_centre_is_its_median(spread, median):
    from pdd_plan.inputs.schema.uncertainty import Spread
    from pdd_plan.uncertainty.draws import Law

    s = Spread(**spread, source="test")
    assert s.centre() == pytest.approx(median)
    params = {k: v for k, v in spread.items() if k != "dist"}
    assert s.centre() == pytest.approx(float(Law(s.dist, params).ppf(0.5)))
