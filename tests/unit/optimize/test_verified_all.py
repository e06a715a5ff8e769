"""`verified_all` takes the architectures up in turn after solving each one's first plan:
its outcomes, and the first error it raises, are those of verifying them one after another."""

from __future__ import annotations

import pytest

from pdd_plan.common.errors import InfeasibleError, InputError
from pdd_plan.optimize import verify
from pdd_plan.sim import worker

pytestmark = pytest.mark.unit


class _Pb:
    class search:  # noqa: N801  (the Problem field it reads)
        time_limit_s = 60.0

    file = "s.yaml"


def _fake(script: dict, log: list):
    """verification() stand-ins: each architecture's script says what its steps do."""

    def verification(pb, a, classes, rate, n, rounds):
        kind = script[a]
        log.append(("solve", a))
        if kind == "input_error_first":
            raise InputError("s.yaml", "sla.tpot_ms", "bad", "fix")
        if kind == "infeasible_first":
            raise InfeasibleError(f"{a}: no plan")
        v = yield f"{a}-0"
        log.append(("got", a, v["plan"]))
        if kind == "resolve":
            v = yield f"{a}-1"
            log.append(("got", a, v["plan"]))
        if kind == "replay_miss":
            raise InfeasibleError(f"{a}: replay misses")
        return (a, v["plan"])

    return verification


def _run(monkeypatch, script):
    log: list = []
    monkeypatch.setattr(verify, "verification", _fake(script, log))
    monkeypatch.setattr(worker, "_verify", lambda rs, plan, a, n, seed, stage=0: {"plan": plan})

    class Rs:
        seed = 3

    out = verify.verified_all(_Pb, Rs, list(script), None, None, 100, 2, fork=False)
    return out, log


def test_outcomes_are_each_architectures_own(monkeypatch):
    out, log = _run(
        monkeypatch,
        {"pdd": "resolve", "cdc_pd": "replay_miss", "idc_pd": "infeasible_first"},
    )
    assert out["pdd"] == ("pdd", "pdd-1")
    assert isinstance(out["cdc_pd"], InfeasibleError) and "replay misses" in str(out["cdc_pd"])
    assert isinstance(out["idc_pd"], InfeasibleError) and "no plan" in str(out["idc_pd"])
    # every first solve before any replay's figures are taken up
    assert [e[0] for e in log[:3]] == ["solve"] * 3
    assert ("got", "pdd", "pdd-1") in log


def test_a_later_architectures_error_waits_for_the_earlier_ones(monkeypatch):
    """Raised in its turn: after pdd is done, as one after another would have raised it."""
    log: list = []
    script = {"pdd": "resolve", "cdc_pd": "input_error_first", "idc_pd": "plain"}
    monkeypatch.setattr(verify, "verification", _fake(script, log))
    monkeypatch.setattr(worker, "_verify", lambda rs, plan, a, n, seed, stage=0: {"plan": plan})

    class Rs:
        seed = 3

    with pytest.raises(InputError, match="sla.tpot_ms"):
        verify.verified_all(_Pb, Rs, list(script), None, None, 100, 2, fork=False)
    assert ("got", "pdd", "pdd-1") in log  # pdd finished first
    assert not any(e[0] == "got" and e[1] == "idc_pd" for e in log)


def test_a_stretch_that_leaves_no_plan_is_followed_by_the_line_capped(monkeypatch):
    """A replay missing on the line first stretches the line's transfer-time estimate
    (Caps.tightened). The stretch lengthens every transfer, the bare time too, which no line
    bought shortens: where the re-solve under it finds no plan, the line's utilization is
    capped instead (10% under what the plan used), and that plan is replayed."""
    from types import SimpleNamespace

    from pdd_plan.optimize.caps import Caps

    solved: list[Caps] = []

    class Plan(SimpleNamespace):
        def model_copy(self, update):
            return update["simulated"]

    def solve(pb, a, classes, rate, caps):
        solved.append(caps)
        if caps.line_delay > 1.0:
            raise InfeasibleError(f"{a}: no plan under the stretch")
        return Plan(rate=40.0, caps=caps)

    monkeypatch.setattr(verify, "solve_architecture", solve)
    monkeypatch.setattr(verify, "check_size", lambda *a: None)
    monkeypatch.setattr(verify.optimize_summary, "summarize", lambda raw, *a: raw)
    monkeypatch.setattr(verify.optimize_summary, "utilization", lambda raw, which: 0.8)
    monkeypatch.setattr(verify, "simulated_of", lambda v, h: h)

    class Pb(_Pb):
        class search:  # noqa: N801
            prefill_utilization, line_utilization, decode_utilization = 0.97, 0.95, 0.9
            time_limit_s = 60.0

        sites = SimpleNamespace(prefill="dc-a")

    miss = SimpleNamespace(sla_met=False, bottleneck="line")
    met = SimpleNamespace(sla_met=True, bottleneck=None)
    gen = verify.verification(Pb, "cdc_pd", None, None, 100, 3)
    first = next(gen)
    assert first.caps == Caps(0.97, 0.95, 0.9)
    second = gen.send(miss)  # the stretch finds no plan; the line capped: 0.9 x 0.8 used
    assert [c.line_delay for c in solved] == [1.0, pytest.approx(1 / 0.9**3), 1.0]
    assert second.caps.line == pytest.approx(0.72)
    with pytest.raises(StopIteration) as done:
        gen.send(met)
    raw, history = done.value.value
    assert raw is second and [h["round"] for h in history] == [0, 1, 2]
    assert "infeasible" in history[1] and history[2]["sla_met"]
