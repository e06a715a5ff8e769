"""`evaluate` on planned and shrunk fleets, analytic and replayed: a verified plan serves its
rate, fewer instances never serve more, the CLI's JSON is deterministic (unit side: tests/unit/evaluate)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from pdd_plan.evaluate import Options, analytic, evaluate, fleet
from pdd_plan.inputs.context import build_context
from pdd_plan.outputs.plan import load_plan
from tests.cli_helpers import invoke
from tests.unit.evaluate.test_evaluate import ANALYTIC, FLEET, _fleet_data, _scenario  # noqa: F401 (shared with the unit tests)

pytestmark = pytest.mark.integration


# Each goodput is a bisection's, found to within its rel_tol below the true rate, and two fleets
# start from different brackets (a rate bound that counts relay decode), so goodputs that are
# equal in truth may differ by that much: compare to it, not to rounding.
BISECTION_TOL = inspect.signature(analytic.search).parameters["rel_tol"].default


ROOT = Path(__file__).resolve().parents[2]


PLAN = ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"  # optimize --out, verified


# the simulator may move the rate off the analytic one; a few steps is agreement
AGREE = 0.10


@pytest.fixture(scope="module")
def plan_eval():
    p = load_plan(PLAN)
    ctx = build_context(p.inputs, str(PLAN))
    return p, evaluate(
        ctx, fleet.from_plan(ctx, p, str(PLAN)), Options(sim_requests=2000)
    ).as_dict()


@pytest.mark.integration
def test_verified_plan_serves_at_least_its_rate(plan_eval):
    p, out = plan_eval
    assert set(out["architectures"]) == set(p.plans)
    for a, r in out["architectures"].items():
        ap = p.plans[a]
        assert ap.simulated is not None and ap.simulated.sla_met  # the premise: verified
        assert r["goodput_rps"] >= p.rate_rps, a
        # tolerance: $0.05: five cents over a fleet whose groups are each rounded to the cent in
        # the plan file
        assert r["cost_per_hour"] == pytest.approx(ap.cost_per_hour, abs=0.05)
        # the optimizer's BCR definition: requests per dollar
        assert r["bcr"] == pytest.approx(r["goodput_rps"] * 3600 / r["cost_per_hour"], rel=1e-3)
        # confirmed: the replay met the SLA at the goodput, and not one step above
        sim = r["simulated"]
        ok = [x for x in sim["replays"] if x["sla_met"]]
        assert max(x["rate_rps"] for x in ok) == pytest.approx(r["goodput_rps"], rel=1e-4)
        above = sim["one_step_above"]
        assert above["rate_rps"] <= r["goodput_rps"] * (1 + out["step"]) * (1 + 1e-6)
        assert r["ttft_s"]["p90"] <= p.sla.ttft_p90_s and r["ttft_s"]["p99"] <= p.sla.ttft_p99_s
        assert r["tpot_ms"]["p90"] <= p.sla.tpot_ms
        # tolerance: 1e-3: each of the 3 route shares is rounded to 4 decimals
        assert sum(r["route_share"].values()) == pytest.approx(1.0, abs=1e-3)
        assert r["gives_out_first"]["resource"] in (
            "prefill_queue",
            "ttft",
            "decode_tpot",
            "kv_memory",
            "line",
            "relay",
        )


@pytest.mark.integration
def test_analytic_and_simulated_goodput_agree(plan_eval):
    _, out = plan_eval
    for a, r in out["architectures"].items():
        an = r["analytic"]["goodput_rps"]
        assert abs(r["goodput_rps"] - an) <= AGREE * an, (a, r["goodput_rps"], an)


def _shrunk(data: dict, key: str, i: int) -> dict | None:
    d = json.loads(json.dumps(data))
    g = d["fleet"][key]["instances"][i]
    if g["count"] == 0:
        return None
    g["count"] -= 1
    return d


def _goodputs(data: dict) -> dict[str, float]:
    ctx, fl = _scenario(data)
    out = evaluate(ctx, fl, ANALYTIC).as_dict()
    return {a: out["architectures"].get(a, {}).get("goodput_rps", 0.0) for a in fl}


@pytest.mark.integration
def test_removing_an_instance_never_raises_goodput():
    """Property over fleets: every one-instance shrink of every group (analytic search), on
    a fleet whose line binds (one 10G line)."""
    data = _fleet_data()
    data["fleet"]["all"]["line"]["count"] = 1
    base = _goodputs(data)
    assert all(v > 0 for v in base.values()), base
    for key, f in data["fleet"].items():
        for i in range(len(f["instances"])):
            d = _shrunk(data, key, i)
            if d is None:
                continue
            for a, g in _goodputs(d).items():
                assert g <= base[a] * (1 + BISECTION_TOL), (key, i, a, g, base[a])


@pytest.mark.integration
def test_shrunk_plan_fleet_simulated_is_not_above():
    """The same property after the simulator's verification: one prefill instance fewer."""
    d = _fleet_data()
    d["architectures"] = ["idc_pd"]
    ctx, fl = _scenario(d)
    full = evaluate(ctx, fl, Options(sim_requests=1000)).architectures["idc_pd"]
    d["fleet"]["idc_pd"]["instances"][0]["count"] -= 1
    ctx, fl = _scenario(d)
    less = evaluate(ctx, fl, Options(sim_requests=1000)).architectures["idc_pd"]
    assert less.goodput_rps < full.goodput_rps
    # prefill-bound: 5 of 6 prefill instances serve about 5/6 of the rate (hand arithmetic)
    assert less.analytic["goodput_rps"] == pytest.approx(
        full.analytic["goodput_rps"] * 5 / 6, rel=0.03
    )


@pytest.mark.integration
def test_cli_json_is_deterministic_and_names_everything():
    args = ("evaluate", str(FLEET), "--no-simulate", "-f", "json")
    a, b = invoke(*args), invoke(*args)
    assert a.exit_code == 0, a.output
    assert a.stdout == b.stdout
    out = json.loads(a.stdout)
    assert set(out["architectures"]) == {"pdd", "cdc_pd", "idc_pd"}
    pdd, cdc = out["architectures"]["pdd"], out["architectures"]["cdc_pd"]
    # CDC-PD runs PDD's fleet with every request P -> MD: its relay decode idles, not costed
    assert cdc["route_share"]["p_md"] == 1.0
    assert [g["role"] for g in cdc["fleet"]["unused"]] == ["relay_decode"]
    relay = next(g for g in pdd["fleet"]["instances"] if g["role"] == "relay_decode")
    assert pdd["cost_per_hour"] == pytest.approx(cdc["cost_per_hour"] + relay["cost_per_hour"])
    assert cdc["goodput_rps"] <= pdd["goodput_rps"] * (1 + BISECTION_TOL)


@pytest.mark.integration
def test_bursty_arrivals_lower_the_fleets_goodput():
    # the fleet's queue law is the optimizer's (strata moments, renewal arrivals of the
    # scenario's cv): burstier arrivals wait longer, so the same fleet meets the SLA at a
    # lower rate (cv 1 is the Poisson law it always used)
    got = {}
    for cv in (1.0, 2.0):
        d = _fleet_data()
        d["workload"]["arrival_cv"] = cv
        d["sla"].update(ttft_p90_s=1.0, ttft_p99_s=2.0)  # the TTFT law binds, not a cap
        ctx, specs = _scenario(d)
        got[cv] = evaluate(ctx, specs, ANALYTIC).architectures["idc_pd"].goodput_rps
    assert 0 < got[2.0] < got[1.0]
