"""The analytic line law against the replay on hand-written fleets over a shared, lossy line:
TTFT and KV-transfer P50/P90/P99 within 15% with slow start after idle (a sender idle past its
RTO restarts), loss that grows with the line's load, other tenants' share, the sender's copy
(fixed and per byte) and per-transfer setup; and the pristine line beside them.

Each fleet is evaluated as `pdd-plan evaluate` does (`evaluate.analytic.at_rate`) and replayed
(`sim.run`) at the same rate: the same fleet, the same line, no optimizer in between."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from pdd_plan.evaluate import analytic, fleet
from pdd_plan.inputs.context import build_context, load_scenario
from pdd_plan.inputs.profiles import data_dir, example_path
from pdd_plan.optimize import problem_of
from pdd_plan.optimize.caps import Caps
from pdd_plan.sim.run import run
from pdd_plan.workload.classes import build_classes

N = 20_000  # requests a replay: seeded, ~1-3 s each


def _scenario(tmp: Path, line: dict, arch: str, rate: float, relay: int = 0) -> str:
    """The default workload on a hand-written fleet (6 x 16 H100 prefill, 2 x 16 H200 main
    decode) and one hand-written line on a bundled profile; an SLA loose enough that every
    figure is a law's, not a refusal."""
    d = yaml.safe_load(example_path("pdd-paper").read_text())
    base = line.pop("base", "shared-10g")
    prof = yaml.safe_load((data_dir() / "profiles" / "lines" / f"{base}.yaml").read_text())
    prof.update(line, name="t-line")
    lp = tmp / "t-line.yaml"
    lp.write_text(yaml.safe_dump(prof))
    d["link"] = {"candidates": [str(lp)], "max_lines": 1}
    d["workload"]["rate_rps"] = rate
    d["architectures"] = [arch]
    d["sla"] = {"ttft_p90_s": 100, "ttft_p99_s": 200, "tpot_ms": 60}
    inst = [
        {"role": "prefill", "gpu": "h100", "datacenter": "dc-a", "count": 6,
         "gpus_per_instance": 16},
        {"role": "main_decode", "gpu": "h200", "datacenter": "dc-b", "count": 2,
         "gpus_per_instance": 16},
    ]  # fmt: skip
    if relay:
        inst.append({"role": "relay_decode", "gpu": "h100", "datacenter": "dc-a",
                     "count": relay, "gpus_per_instance": 16})  # fmt: skip
    d["fleet"] = {"all": {"instances": inst, "line": {"sku": "t-line", "count": 1}}}
    p = tmp / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    return str(p)


def law_and_replay(
    path: str, arch: str, rate: float, mean: bool = False
) -> tuple[list[float], list[float]] | tuple[float, float]:
    """(law, replay): TTFT P50/P90/P99 then KV transfer P50/P90/P99, seconds (or, ``mean``,
    the mean KV transfer)."""
    ctx = build_context(load_scenario(path), path)
    ctx, fleets = fleet.from_scenario(ctx)
    cls = build_classes(ctx.class_spec)
    fm = analytic.fleet_model(problem_of(ctx), fleets[arch], cls, Caps(decode=1.0))
    at = analytic.at_rate(fm, rate)
    assert at.ok, at.limits
    plan = at.plan
    res = run(ctx, plan, arch, N)
    k = res.kept()
    kv = res.kv_transfer_s[k]
    kv = kv[~np.isnan(kv)]
    if mean:
        return float(plan.kv_transfer_s.mean), float(kv.mean())
    law = [plan.ttft_s.p50, plan.ttft_s.p90, plan.ttft_s.p99]
    law += [plan.kv_transfer_s.p50, plan.kv_transfer_s.p90, plan.kv_transfer_s.p99]
    sim = [float(np.percentile(res.ttft_s[k], q)) for q in (50, 90, 99)]
    sim += [float(np.percentile(kv, q)) for q in (50, 90, 99)]
    return law, sim


# Measured (law vs the 20k replay, TTFT then KV P50/P90/P99, %): after_idle 4 req/s
# -2.1/+1.2/+0.3, -2.7/+1.3/+0.3; 30 req/s -0.8/-0.3/-0.1, -4.4/+0.4/+0.1; congestive 24 req/s
# +1.6/+0.1/+0.0, -4.5/+0.4/+0.1; every_transfer -1.0/-0.3/-0.1, -4.0/+0.5/+0.1; pristine
# eth-25g -0.4/-0.2/-2.0, -1.7/-0.6/-5.5 (BENCHMARKS.md, "The line one transfer gets"). Before
# the strata's spread (a stratum of the top half of a class put every request at its mean
# size) the flow-capped line read the KV P50 -21 % and, per class (evaluate kept eight classes,
# not the strata), the P90 -14 %.
CASES = [
    # slow start after idle: at 4 req/s a prefill instance sends every 1.5 s, so its lanes
    # often idle past their RTO (220 ms) and restart; at 30 req/s they seldom do
    ("after_idle_4", {"gbps": 25}, "cdc_pd", 4.0),
    ("after_idle_30", {"gbps": 25}, "cdc_pd", 30.0),
    # loss that grows with the line's load (0.4 of it other tenants'), a 5 ms setup
    (
        "congestive",
        {
            "gbps": 25,
            "loss_rate": 2e-5,
            "congestive_loss_rate": 3e-4,
            "background_load": 0.4,
            "setup_ms": 5,
        },
        "cdc_pd",
        24.0,
    ),  # fmt: skip
    # slow start on every transfer, the sender's copy at 8 Gb/s on top of its fixed 24.5 ms
    (
        "every_transfer",
        {"gbps": 25, "slow_start": "every_transfer", "sender_copy_gbps": 8, "background_load": 0.0},
        "cdc_pd",
        30.0,
    ),  # fmt: skip
    # PDD's fleet with no relay pool on the shared line: every request P -> MD
    ("pdd_shared", {"gbps": 25}, "pdd", 20.0),
    ("pristine", {"base": "eth-25g"}, "cdc_pd", 30.0),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, line, arch, rate", CASES, ids=[c[0] for c in CASES])
def test_law_within_15_percent_of_the_replay(tmp_path, name, line, arch, rate):
    law, sim = law_and_replay(_scenario(tmp_path, dict(line), arch, rate), arch, rate)
    errs = [a / s - 1 for a, s in zip(law, sim)]
    assert all(abs(e) <= 0.15 for e in errs), (name, law, sim)


@pytest.mark.slow
def test_slow_start_after_idle_costs_what_the_replay_says(tmp_path):
    """At 4 req/s the restarts after idle add to the transfers, in the law and the replay. The
    law takes a sender's transfers as Poisson (its lanes idle at an arrival as often as on
    average, 38% here); the replay's find them idle 8% of the time (an instance takes no
    request while it prefills a long, low-hit request, whose long transfer then keeps its
    lanes busy while it takes the next ones), so the law's restarts cost more: 13 ms of mean
    transfer time against 3 ms (of 1.5 s). A bound, not a match: between 1 and 6 times."""
    got = {}
    for mode in ("after_idle", "first_use"):
        line = {"gbps": 25, "slow_start": mode}
        d = tmp_path / mode  # profiles are read once per path
        d.mkdir()
        got[mode] = law_and_replay(_scenario(d, line, "cdc_pd", 4.0), "cdc_pd", 4.0, True)
    law_cost = got["after_idle"][0] - got["first_use"][0]
    sim_cost = got["after_idle"][1] - got["first_use"][1]
    assert sim_cost > 0.001 and sim_cost <= law_cost <= 6 * sim_cost, (law_cost, sim_cost)
