"""The one verdict: the cheapest fleet meeting the SLA at the planned rate (sizing's local
search against a check known by hand), and a planted case where capacity per dollar favours
PDD while the planned cost favours the baseline: every figure of the comparison (the
probability, the gain band, the median, the tornado, the flip sentence, the break-even) says
the baseline wins, the capacity figure alone says otherwise."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pdd_plan.architectures import LOCAL_BASELINE, RELAY_ARCH
from pdd_plan.evaluate.fleet import FleetSpec
from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema.uncertainty import Uncertainty
from pdd_plan.outputs.plan import InstanceGroup, LineChoice
from pdd_plan.uncertainty import block, draws, paired, sensitivity, sizing

pytestmark = pytest.mark.unit


def _group(role: str, count: int, usd: float) -> InstanceGroup:
    return InstanceGroup(role=role, gpu="h100", datacenter="dc-a", count=count,
                         gpus_per_instance=8, tp=8, dp=1, ep=1, cost_per_hour=usd * count)  # fmt: skip


def _fleet(arch: str, prefill: int, decode: int, lines: int, relay: int = 0) -> FleetSpec:
    role = "decode" if arch == LOCAL_BASELINE else "main_decode"
    groups = [_group("prefill", prefill, 40.0), _group(role, decode, 80.0)]
    if relay:
        groups.append(_group("relay_decode", relay, 10.0))
    line = None
    if lines:
        line = LineChoice(sku="eth-10g", gbps=10, count=lines, cost_per_hour=4.0 * lines,
                          utilization=0.5, rtt_ms=10)  # fmt: skip
    return FleetSpec(arch, groups, line, [], "x")


def _counts(fs: FleetSpec) -> dict[str, int]:
    out = {g.role: g.count for g in fs.instances}
    out["line"] = fs.line.count if fs.line else 0
    return out


class Need:
    """A closed-form check: meets with >= p prefill, >= d decode, >= l lines; each resource's
    use is need / have (the rate-linear ones are what sizing may prune on)."""

    def __init__(self, p: int, d: int, lines: int):
        self.need = {"prefill": p, "main_decode": d, "line": lines}
        self.calls = 0

    def __call__(self, fs: FleetSpec):
        self.calls += 1
        c = _counts(fs)
        use = {
            "prefill_queue": self.need["prefill"] / max(c.get("prefill", 0), 1e-9),
            "decode_tpot": self.need["main_decode"] / max(c.get("main_decode", 0), 1e-9),
            "line": self.need["line"] / max(c["line"], 1e-9),
        }
        # a use of exactly 1 meets here (the caps are inclusive in this toy)
        ok = all(u <= 1.0 for u in use.values())
        return ok, max(use.values()), use


def test_sizing_finds_the_cheapest_fleet_by_hand():
    cost = FleetSpec.cost_per_hour.fget
    # too big: 8 prefill, 3 decode, 3 lines for a need of 5 / 1 / 1 -> dropped to exactly it
    got = sizing.cheapest(_fleet(RELAY_ARCH, 8, 3, 3), Need(5, 1, 1), cost)
    assert _counts(got) == {"prefill": 5, "main_decode": 1, "line": 1}
    assert cost(got) == pytest.approx(5 * 40 + 80 + 4)
    # too small: 2 prefill for a need of 4 -> grown to 4, nothing else touched
    got = sizing.cheapest(_fleet(RELAY_ARCH, 2, 1, 1), Need(4, 1, 1), cost)
    assert _counts(got) == {"prefill": 4, "main_decode": 1, "line": 1}
    # relay decode may go to none (PDD without relay); a needed role never does
    got = sizing.cheapest(_fleet(RELAY_ARCH, 5, 1, 1, relay=2), Need(5, 1, 1), cost)
    assert "relay_decode" not in _counts(got) and _counts(got)["main_decode"] == 1


def test_sizing_says_none_when_nothing_helps():
    def never(fs):
        return False, 2.0, {}

    assert sizing.cheapest(_fleet(RELAY_ARCH, 2, 1, 1), never, lambda f: 1.0) is None


def test_pruning_skips_checks_not_answers():
    # a prefill use of 0.9 over 5 instances: 4 would run it at 1.125, refused without a check
    # (a use of 0.8 would be exactly 1 on 4: the check decides)
    fs = _fleet(RELAY_ARCH, 5, 1, 1)
    assert sizing._hopeless(fs, "prefill", {"prefill_queue": 0.9})
    assert not sizing._hopeless(fs, "prefill", {"prefill_queue": 0.8})
    need = Need(4.5, 1, 1)
    sizing.cheapest(fs, need, FleetSpec.cost_per_hour.fget)
    assert need.calls == 1  # only the start: the one possible drop refused by its linear use


class Planted:
    """Capacity per dollar favours PDD (100 vs 90 req/$), the planned cost the baseline
    (PDD's cheapest fleet meeting the rate costs $400/h against $320/h), at every draw."""

    def __init__(self, fleets):
        self.fleets = fleets
        self.planned = {a: 40.0 for a in fleets}
        # no margin kept (each at 1): the planted figures are the fleets' own
        free = dict.fromkeys(paired.MARGINS, 1.0)
        self.ctx = SimpleNamespace(scenario=SimpleNamespace(search=SimpleNamespace(**free)))

    def goodput(self, values, arch):
        return 40.0

    def cost(self, values, arch):
        return 40.0 * 3600 / self.bcr(values, arch)

    def bcr(self, values, arch):
        return (100.0 if arch == RELAY_ARCH else 90.0) / values.get("kv_bytes", 1.0) ** 0.1

    def meets(self, values, arch, rate):
        return True

    def sized(self, values, arch):
        return self.fleets[arch]

    def planned_cost(self, values, arch):
        return (400.0 if arch == RELAY_ARCH else 320.0) * values.get("kv_bytes", 1.0) ** 0.1

    def planned_bcr(self, values, arch):
        return 40.0 * 3600 / self.planned_cost(values, arch)


def test_planted_case_every_place_says_the_same():
    u = Uncertainty.model_validate(
        {"inputs": {"kv_bytes": {"dist": "uniform", "low": 0.8, "high": 1.4, "source": "x"}}}
    )
    ms, _ = draws.marginals(u, profiles.model("llama-3.1-8b"))
    d = draws.draw([m for m in ms if m.name == "kv_bytes"], 16, 0)
    fleets = {
        RELAY_ARCH: _fleet(RELAY_ARCH, 8, 1, 2),
        LOCAL_BASELINE: _fleet(LOCAL_BASELINE, 6, 1, 0),
    }
    ev = Planted(fleets)
    pr = paired.evaluate(ev, d, ev.planned)
    v = block._versus(ev, d, pr, sensitivity.levers(d, 1.0), LOCAL_BASELINE)
    verdict = 320 / 400 - 1  # -20%: the baseline's cost over PDD's at the planned rate
    assert v.p_beats == 0.0
    # tolerance: 5e-5: every draw's gain is -0.2 exactly (both costs scale by the same factor);
    # the verdict keeps 4 significant digits (paired.band, block._versus): half a unit of -0.2000
    assert v.median_gain == pytest.approx(verdict, abs=5e-5)
    assert v.gain.p10 == pytest.approx(verdict, abs=5e-5)
    assert v.gain.p90 == pytest.approx(verdict, abs=5e-5)
    assert all(g < 0 for r in v.tornado for g in (r.gain_low, r.gain_high))
    assert v.flip.startswith("PDD trails IDC-PD at the median inputs")
    # the second, named figure keeps its own sign
    assert v.capacity_median_gain == pytest.approx(100 / 90 - 1, abs=1e-3)
    assert np.sign(v.capacity_gain.p50) > 0
    text = sensitivity.line_break_even(ev, d, RELAY_ARCH, LOCAL_BASELINE)
    # PDD's GPUs alone (8 x 40 + 80 = $400/h) cost more than the baseline's $320/h
    assert "trails IDC-PD at the median inputs even with a free line" in text
