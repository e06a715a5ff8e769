"""The flip sentence, the tornado and the line break-even on closed-form BCRs (the evaluator
replaced by a function whose answer is known by hand), the paired probabilities, N-1's fleets."""

from __future__ import annotations

import numpy as np
import pytest

from pdd_plan.architectures import LOCAL_BASELINE, RELAY_ARCH
from pdd_plan.evaluate.fleet import FleetSpec
from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema.uncertainty import Uncertainty
from pdd_plan.outputs.plan import InstanceGroup, LineChoice
from pdd_plan.uncertainty import draws, paired, sensitivity
from pdd_plan.uncertainty.n_minus_1 import losses

pytestmark = pytest.mark.unit


def _draws(**inputs) -> draws.Draws:
    u = Uncertainty.model_validate({"inputs": inputs})
    ms, _ = draws.marginals(u, profiles.model("llama-3.1-8b"))
    ms = [m for m in ms if m.name in inputs]
    return draws.draw(ms, 8, 0)


class Closed:
    """BCRs as functions of the inputs: PDD 100 x kv^-1, the baseline 90."""

    def __init__(self, fleets=None):
        self.fleets = fleets or {}

    def bcr(self, values, arch):
        return 100.0 / values.get("kv_bytes", 1.0) if arch == RELAY_ARCH else 90.0

    def planned_bcr(self, values, arch):  # the verdict's figure: here the same closed form
        return self.bcr(values, arch)

    def goodput(self, values, arch):
        return {RELAY_ARCH: 10.0, LOCAL_BASELINE: 9.0}[arch]


KV = {"dist": "uniform", "low": 0.8, "high": 1.4, "source": "assumption"}


def test_flip_found_where_the_closed_form_crosses():
    d = _draws(kv_bytes=KV)
    gains = sensitivity.Gains(Closed(), RELAY_ARCH, LOCAL_BASELINE)
    ls = sensitivity.levers(d, 1.0)
    rows = sensitivity.tornado(gains, d, ls)
    # median kv 1.1: 100 / 1.1 = 90.9 > 90, PDD ahead; kv above 100 / 90 = 1.111 flips it
    assert rows[0].gain_low == pytest.approx(100 / (0.8 + 0.1 * 0.6) / 90 - 1, rel=1e-3)
    text = sensitivity.flip(gains, d, ls, rows)
    assert "beats IDC-PD at the median" in text and "above" in text
    value = float(text.split("above ")[1].split(" ")[0])
    # tolerance: the flip search bisects FLIP_STEPS times over the lever's range: that bracket plus
    # print rounding
    assert value == pytest.approx(100 / 90, abs=0.6 * 0.4 / 2**sensitivity.FLIP_STEPS + 1e-3)


class StateBCR(Closed):
    """PDD's BCR falls by 1 per MB of per-request state: 100 - state / 1e6; the baseline 90."""

    def bcr(self, values, arch):
        return 100.0 - values["request_state_bytes"] / 1e6 if arch == RELAY_ARCH else 90.0


def test_request_state_has_a_tornado_bar_and_its_flip():
    band = {"dist": "uniform", "low": 0, "high": 18_710_528, "source": "docs/kv-bytes.md"}
    d = _draws(request_state_bytes=band)
    gains = sensitivity.Gains(StateBCR(), RELAY_ARCH, LOCAL_BASELINE)
    ls = sensitivity.levers(d, 1.0)
    (row,) = sensitivity.tornado(gains, d, ls)
    # P10 / P90 of the uniform: 1,871,052.8 and 16,839,475.2 bytes
    assert row.input == "request_state_bytes"
    assert (row.low, row.high) == pytest.approx((1_871_052.8, 16_839_475.2))
    assert row.gain_high == pytest.approx((100 - 16.8394752) / 90 - 1, rel=1e-3)
    # median 9.36 MB: PDD ahead; past 10 MB (100 - 10 = 90) it trails
    text = sensitivity.flip(gains, d, ls, [row])
    assert "per-request state" in text and "beats IDC-PD at the median" in text, text
    value = float(text.split("above ")[1].split(" ")[0])
    assert value == pytest.approx(1e7, abs=0.4 * 18_710_528 / 2**sensitivity.FLIP_STEPS + 1e4)


def test_no_flip_inside_the_band():
    d = _draws(kv_bytes={"dist": "uniform", "low": 0.5, "high": 1.0, "source": "assumption"})
    gains = sensitivity.Gains(Closed(), RELAY_ARCH, LOCAL_BASELINE)
    ls = sensitivity.levers(d, 1.0)
    text = sensitivity.flip(gains, d, ls, sensitivity.tornado(gains, d, ls))
    assert "does not flip" in text


def _fleet(arch, line_count):
    g = InstanceGroup(role="prefill", gpu="h100", datacenter="dc-a", count=2,
                      gpus_per_instance=8, tp=8, dp=1, ep=1, cost_per_hour=40.0)  # fmt: skip
    line = None
    if line_count:
        line = LineChoice(sku="eth-10g", gbps=10, count=line_count, cost_per_hour=2.0,
                          utilization=0.5, rtt_ms=10)  # fmt: skip
    return FleetSpec(arch, [g], line, [], "x")


def test_line_break_even_by_hand():
    fleets = {RELAY_ARCH: _fleet(RELAY_ARCH, 2), LOCAL_BASELINE: _fleet(LOCAL_BASELINE, 0)}
    ev = Closed(fleets)
    # both planned at 10 req/s; the baseline's cheapest fleet meeting it costs $36/h
    ev.planned = {RELAY_ARCH: 10.0, LOCAL_BASELINE: 10.0}
    ev.sized = lambda values, arch: fleets[arch]
    ev.planned_bcr = lambda values, arch: 10.0 * 3600 / 36.0 if arch == LOCAL_BASELINE else 0.0
    d = _draws(kv_bytes=KV)
    text = sensitivity.line_break_even(ev, d, RELAY_ARCH, LOCAL_BASELINE)
    # equal cost at 10 req/s: PDD's $40/h of GPUs + the line = $36/h -> no line price is
    # low enough; at $44/h for the baseline the 2 lines may cost $4/h together
    assert "even with a free line" in text
    ev.planned_bcr = lambda values, arch: 10.0 * 3600 / 44.0 if arch == LOCAL_BASELINE else 0.0
    text = sensitivity.line_break_even(ev, d, RELAY_ARCH, LOCAL_BASELINE)
    per_month = (44 - 40) / 2 * 8760 / 12
    assert f"${per_month:,.0f}/month" in text and "stays ahead" in text


def test_beats_counts_paired_draws():
    bcr = np.array([[2.0, 1.0], [1.0, 1.0], [0.5, 1.0], [3.0, 1.0]])
    p = paired.Paired((RELAY_ARCH, LOCAL_BASELINE), bcr, bcr, bcr, bcr > 0, 1 / bcr, bcr)
    share, se, ties = paired.beats(p, RELAY_ARCH, LOCAL_BASELINE)
    assert (share, ties) == (0.5, 0.25)
    assert se == pytest.approx(np.sqrt(0.25 / 4))


def test_n_minus_1_takes_one_instance_and_one_line():
    out = losses(_fleet(RELAY_ARCH, 2))
    assert out["prefill"].instances[0].count == 1
    assert out["prefill"].instances[0].cost_per_hour == pytest.approx(20.0)
    assert out["line"].line.count == 1
    assert "line" not in losses(_fleet(RELAY_ARCH, 1))


def test_strongest_levers_are_the_widest_bars():
    from pdd_plan.outputs.plan_uncertainty import Band, TornadoRow, Versus
    from pdd_plan.uncertainty.replan import strongest

    d = _draws(kv_bytes=KV, line_rate=KV, gpu_price=KV)
    ls = sensitivity.levers(d, 1.0)
    rows = [
        TornadoRow(input="kv_bytes", low=0.8, high=1.4, gain_low=0.1, gain_high=-0.1),
        TornadoRow(input="line_rate", low=0.8, high=1.4, gain_low=0.0, gain_high=0.5),
        TornadoRow(input="gpu_price", low=0.8, high=1.4, gain_low=0.0, gain_high=0.01),
    ]
    v = Versus(baseline=LOCAL_BASELINE, p_beats=0.5, stderr=0.1, ties=0.0, gain=Band(),
               median_gain=0.0, flip="", tornado=rows)  # fmt: skip
    assert [lv.name for lv in strongest({LOCAL_BASELINE: v}, ls)] == ["line_rate", "kv_bytes"]
