"""Plans under uncertainty, end to end: the nominal draw is evaluate's own goodput, goodput
moves the way each input says, the block is deterministic and round-trips through the plan
file, and the CLI prints the verdict's probability (and refuses bad --draws in one line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdd_plan.architectures import LOCAL_BASELINE, RELAY_ARCH
from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs.context import build_context
from pdd_plan.optimize.caps import Caps
from pdd_plan.outputs.plan import load_plan, parse_plan
from pdd_plan.uncertainty import Options, assess, paired, perturb, replay, robust
from pdd_plan.uncertainty.block import make_draws
from pdd_plan.uncertainty.paired import pb_of
from pdd_plan.workload.classes import build_classes
from tests.cli_helpers import invoke, refused

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"


@pytest.fixture(scope="module")
def setting():
    p = load_plan(PLAN)
    ctx = build_context(p.inputs, str(PLAN))
    return p, ctx, build_classes(ctx.class_spec), fleet.from_plan(ctx, p, str(PLAN))


def test_nominal_draw_is_evaluates_goodput(setting):
    _, ctx, cls, fleets = setting
    fs = fleets[LOCAL_BASELINE]
    lo, _ = analytic.search(analytic.fleet_model(pb_of(ctx), fs, cls, Caps(decode=1.0)))
    got = perturb.goodput(perturb.apply(pb_of(ctx), cls, {}), fs)
    # both are bisections stopping within their tolerances below the same rate
    assert got == pytest.approx(lo.rate, rel=perturb.REL_TOL + 0.002)


@pytest.mark.parametrize(
    "name, worse, better",
    [("decode_speed", 0.85, 1.15), ("kv_bytes", 1.6, 0.8), ("prefix_hit", -0.2, 0.0)],
)
def test_goodput_moves_the_way_the_input_says(setting, name, worse, better):
    _, ctx, cls, fleets = setting
    fs = fleets[RELAY_ARCH]
    lo = perturb.goodput(perturb.apply(pb_of(ctx), cls, {name: worse}), fs)
    hi = perturb.goodput(perturb.apply(pb_of(ctx), cls, {name: better}), fs)
    assert lo < hi * (1 + perturb.REL_TOL), (name, lo, hi)


def test_more_request_state_never_raises_goodput(setting):
    """Each fleet's SLA goodput is non-increasing in the per-request state (more bytes on the
    line and in decode memory), and a state as large as a 64K context's KV (200 MB) costs the
    line-crossing fleet goodput: the draw reaches the models, and the memo keeps draws apart."""
    _, ctx, cls, fleets = setting
    states = (0.0, 5e6, 18_710_528.0, 6e7, 2e8)
    for arch, fs in fleets.items():
        # fresh searches, no brackets from dominating draws (those would impose the order)
        got = [perturb.goodput(perturb.apply(pb_of(ctx), cls, {"request_state_bytes": s}), fs)
               for s in states]  # fmt: skip
        for a, b in zip(got, got[1:]):
            assert b <= a * (1 + perturb.REL_TOL), (arch, states, got)
    ev = paired.Evaluator(ctx, cls, fleets)
    got = [ev.goodput({"request_state_bytes": s}, RELAY_ARCH) for s in (0.0, 2e8)]
    assert got[1] < got[0] / (1 + perturb.REL_TOL), got


def test_request_state_reaches_the_simulator(setting):
    """A 200 MB state per request (about 5x what a 90%-hit 64K request sends) saturates the
    plan's line in the replay too, and the draw is replayed whole (nothing left out)."""
    p, ctx, cls, _ = setting
    plan = p.plans[RELAY_ARCH]
    ok, big = (
        replay.replay(ctx, cls, plan, RELAY_ARCH, {"request_state_bytes": s}, 2000, 0)
        for s in (0.0, 2e8)
    )
    assert ok.sla_met and not ok.partial
    assert not big.sla_met and big.bottleneck == "line" and not big.partial


def test_block_is_deterministic_and_round_trips(setting):
    p, ctx, cls, _ = setting
    a = assess(ctx, p, Options(draws=4, n_minus_1=False), cls)
    b = assess(ctx, p, Options(draws=4, n_minus_1=False), cls)
    assert a == b and len(a.per_draw) == 4
    # the probability is the share of the per-draw rows where PDD's verdict figure (requests
    # per dollar at the planned rate on the cheapest fleet meeting the SLA) is higher
    rows = a.per_draw
    wins = sum(r.planned_bcr[RELAY_ARCH] > r.planned_bcr[LOCAL_BASELINE] * (1 + 1e-6) for r in rows)
    assert a.comparisons[LOCAL_BASELINE].p_beats == pytest.approx(wins / 4)
    back = parse_plan(json.loads(p.model_copy(update={"uncertainty": a}).to_text("json")))
    assert back.uncertainty == a


def test_cli_prints_the_probability_and_refuses_bad_draws():
    r = invoke("optimize", "narrow-line", "--no-verify", "--draws", 3, "--replan")
    assert r.exit_code == 0, r.stderr
    assert (
        "P(PDD beats IDC-PD at the planned rate)" in r.stdout
        and "perf error band alone" in r.stdout
    )
    # one lever (the speeds, fully correlated): its two ends are the corners
    assert "Re-planned at the 2 P10/P90 corners of perf_speed" in r.stdout
    for bad, word in (("5000", "over the limit"), ("1", ">= 2")):
        refused("optimize", "narrow-line", "--no-verify", "--draws", bad, needle=("--draws", word))


def test_bracketed_goodputs_agree_with_fresh_searches(setting):
    # the brackets one draw's search takes from the draws that dominate it (paired.Evaluator)
    # change how many checks are made, not the answer: each edge overlaps the one a search
    # from scratch finds, and both are within the tolerance
    p, ctx, cls, fleets = setting
    d, _, _ = make_draws(ctx, Options(draws=6))
    ev = paired.Evaluator(ctx, cls, fleets)
    for i in range(len(d)):
        v = d.draw(i)
        for a in (RELAY_ARCH, LOCAL_BASELINE):
            got = ev.edge(v, a)
            fresh = perturb.edge(perturb.apply(pb_of(ctx), cls, v), fleets[a])
            assert got.lo <= fresh.hi * (1 + 1e-9) and fresh.lo <= got.hi * (1 + 1e-9), (i, a)
            # within the tolerance, or nothing served down to the search's floor (a draw of a
            # slow line can leave no rate at which the low-hit transfers meet the P99)
            assert got.hi <= got.lo * (1 + perturb.REL_TOL) + 1e-12 or (
                got.lo == 0
                and got.hi
                <= analytic.rate_bound(
                    perturb.fleet_model(perturb.apply(pb_of(ctx), cls, v), fleets[a])
                )
                * 1e-3
                + 1e-12
            )
            # the served end is served: evaluate's own check at it
            fm = perturb.fleet_model(perturb.apply(pb_of(ctx), cls, v), fleets[a])
            assert got.lo == 0 or analytic.at_rate(fm, got.lo).ok


def test_a_draw_served_at_no_rate_is_found_in_two_checks(setting, monkeypatch):
    """A line at 30% of its rate misses the TTFT SLA at every rate (the crossing alone is over
    it): the edge is the search's floor, a thousandth of the rate bound, as evaluate's own
    bisection (analytic.search, refused at its first check) finds; reached by asking the
    fleet with its line kept warm (perturb.warm: no check of it harder than the fleet's own)
    at the floor right after the first refusal, not by the ~10-check walk down to it."""
    _, ctx, cls, fleets = setting
    ap = perturb.apply(pb_of(ctx), cls, {"line_rate": 0.3})
    asked: list[float] = []
    real = analytic.at_rate

    def counted(fm, rate, *a, **k):
        asked.append(rate)
        return real(fm, rate, *a, **k)

    monkeypatch.setattr(perturb.analytic, "at_rate", counted)
    got = perturb.edge(ap, fleets[RELAY_ARCH])
    monkeypatch.setattr(perturb.analytic, "at_rate", real)
    lo, _ = analytic.search(perturb.fleet_model(ap, fleets[RELAY_ARCH]))
    assert not lo.ok
    assert (got.lo, got.hi) == (0.0, lo.rate)
    assert len(asked) == 2 and asked[1] == lo.rate
    # the warm line's checks are no harder than the line's own, at every load
    fm = perturb.fleet_model(perturb.apply(pb_of(ctx), cls, {}), fleets[RELAY_ARCH])
    assert fm.line is not None and fm.line.sku.slow_start == "after_idle"
    for r in (0.05, 1.0, 10.0, 30.0):
        own, kept = analytic.at_rate(fm, r).limits, analytic.at_rate(perturb.warm(fm), r).limits
        assert kept["ttft"] <= own["ttft"] * (1 + 1e-12), (r, kept, own)


def test_met_counts_by_dominance_are_the_direct_checks(setting):
    p, ctx, cls, fleets = setting
    d, _, _ = make_draws(ctx, Options(draws=8, iid=True))
    fs, rate = fleets[LOCAL_BASELINE], p.plans[LOCAL_BASELINE].goodput_rps
    direct = sum(
        robust.meets(perturb.apply(pb_of(ctx), cls, d.draw(i)), fs, rate) for i in range(len(d))
    )
    assert robust._count_met(ctx, cls, fs, d, rate) == direct


def test_a_recounted_model_checks_as_a_rebuilt_one(setting):
    """The draws resize fleets by recounting the planned fleet's model (perturb.recounted):
    every resize one instance or line either way checks exactly as the model built anew."""
    from pdd_plan.uncertainty import sizing

    p, ctx, cls, fleets = setting
    ap = perturb.apply(pb_of(ctx), cls, {"prefill_speed": 0.9, "decode_speed": 0.9})
    seen = 0
    for a, fs in fleets.items():
        base = perturb.fleet_model(ap, fs)
        for by in (1, -1):
            for _, f in sizing.neighbours(fs, by):
                got = perturb.recounted(base, f)
                if got is None:
                    continue
                seen += 1
                x = analytic.at_rate(got, p.plans[a].goodput_rps)
                y = analytic.at_rate(perturb.fleet_model(ap, f), p.plans[a].goodput_rps)
                assert x.ok == y.ok and x.limits == pytest.approx(y.limits, rel=1e-9, abs=1e-12)
    assert seen >= 8
