"""The replay's warm-up truncation (``pdd_plan.sim.warmup``, one-sided MSER-5) on series with a
known steady state, its edge cases, and what ``run``/``summary``/``verify`` do with it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pdd_plan.inputs.context import build_context
from pdd_plan.inputs.schema.io import read_yaml
from pdd_plan.outputs.plan import Simulated, parse_plan
from pdd_plan.sim.warmup import BATCH, mser, truncate

ROOT = Path(__file__).resolve().parents[3]
PLAN = ROOT / "tests" / "golden" / "pdd-paper.optimize.yaml"


def _mser_by_hand(x: np.ndarray, one_sided: bool) -> int:
    """MSER-5 written out from White, Cobb & Spratt (2000), one loop per truncation point."""
    k = len(x) // BATCH
    z = x[: k * BATCH].reshape(k, BATCH).mean(axis=1)
    best, arg = np.inf, 0
    for d in range(k // 2 + 1):
        kept = z[d:]
        if one_sided and d > 0 and kept.mean() < z.mean():
            continue
        v = float(((kept - kept.mean()) ** 2).sum()) / (k - d) ** 2
        if best == np.inf or v < best * (1 - 1e-12):  # the first minimiser
            best, arg = v, d
    return arg * BATCH


def _mm1_sojourn(n: int, rho: float, seed: int, w0: float = 0.0) -> np.ndarray:
    """M/M/1 FIFO (service rate 1) sojourn times from Lindley's recursion started at wait w0."""
    rng = np.random.default_rng(seed)
    s = rng.exponential(1.0, n)
    a = rng.exponential(1.0 / rho, n)
    walk = np.concatenate([[w0], w0 + np.cumsum(s[:-1] - a[1:])])
    return walk - np.minimum(0.0, np.minimum.accumulate(walk)) + s


def _mminf_in_system(n: int, rate: float, life_s: float, seed: int) -> np.ndarray:
    """Requests in an M/M/inf system (a decode batch without a cap) seen by each arrival, the
    system started empty: N_i = arrivals before i minus departures by its arrival."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1.0 / rate, n))
    d = np.sort(t + rng.exponential(life_s, n))
    return (np.arange(n) - np.searchsorted(d, t, side="right")).astype(float)


@pytest.mark.unit
def test_vectorized_rule_is_the_published_one() -> None:
    rng = np.random.default_rng(3)
    for n in (20, 23, 101, 2000):
        x = rng.exponential(size=n)
        x[: n // 5] *= 0.3  # a low start
        by_hand = _mser_by_hand(x, one_sided=True)
        assert mser(x).requests == by_hand or (not mser(x).settled and by_hand == n // 10 * 5)
    x = rng.exponential(size=5000)
    x[:600] *= 0.2
    assert mser(x).requests == _mser_by_hand(x, one_sided=True) > 0


@pytest.mark.unit
def test_stationary_series_are_barely_cut() -> None:
    """iid requests and an M/M/1 queue started in its stationary law: no transient to drop."""
    iid = [mser(np.random.default_rng(s).exponential(size=20_000)).requests for s in range(20)]
    assert max(iid) <= 50 and sum(iid) <= 100
    rho = 0.9
    cuts = []
    for s in range(20):
        rng = np.random.default_rng(1000 + s)
        w0 = rng.exponential(1.0 / (1.0 - rho)) if rng.random() < rho else 0.0  # P(W > 0) = rho
        cuts.append(mser(_mm1_sojourn(20_000, rho, s, w0)).requests)
    assert max(cuts) <= 1000 and np.mean(cuts) <= 200


@pytest.mark.unit
def test_an_empty_start_is_dropped_and_the_kept_part_reads_steady_state() -> None:
    """A batch that fills from empty (M/M/inf, 1000 in system in steady state, lifetimes of
    25 s at 40 req/s): the kept requests' P10 and mean match the stationary Poisson(1000) law
    (PASTA) far better than the whole window's."""
    a, q10 = 1000.0, stats.poisson(1000.0).ppf(0.10)
    err_all, err_kept = [], []
    for s in range(4):
        n_sys = _mminf_in_system(20_000, 40.0, 25.0, s)
        cut = mser(n_sys)
        assert cut.settled and cut.requests >= 1000  # at least one lifetime of arrivals
        kept = n_sys[cut.requests :]
        err_all.append([np.percentile(n_sys, 10) - q10, n_sys.mean() - a])
        err_kept.append([np.percentile(kept, 10) - q10, kept.mean() - a])
    err_all, err_kept = np.abs(err_all), np.abs(err_kept)
    assert (err_kept < err_all).all()
    assert err_kept.mean(axis=0)[0] < 0.3 * err_all.mean(axis=0)[0]
    assert err_kept.mean(axis=0)[1] < 0.3 * err_all.mean(axis=0)[1]


@pytest.mark.unit
def test_one_sided_a_high_start_is_an_excursion_not_a_warm_up() -> None:
    """A run that starts in a long busy period: plain MSER cuts it (lowering every tail
    figure); an empty start cannot read high, so the one-sided rule keeps it."""
    x = np.random.default_rng(5).exponential(size=10_000)
    x[:1500] += 4.0
    assert _mser_by_hand(x, one_sided=False) >= 1500
    assert mser(x).requests == 0 and mser(x).settled


@pytest.mark.unit
def test_tiny_all_nan_and_unsettled_series() -> None:
    for n in (0, 1, 19):
        t = mser(np.ones(n))
        assert t.requests == 0 and t.settled and "fewer than 20" in t.note
    assert mser(np.full(100, np.nan)).requests == 0
    const = mser(np.ones(20))
    assert const.requests == 0 and const.settled and const.note is None
    trend = mser(np.arange(10_000.0))  # still climbing at the end: no steady state in the run
    assert trend.requests == 0 and not trend.settled and "no steady state" in trend.note
    s = trend.summary(10_000)
    assert s == {
        "method": "MSER-5",
        "requests": 0,
        "kept_requests": 10_000,
        "settled": False,
        "note": trend.note,
    }


@pytest.mark.unit
def test_nan_entries_and_several_series() -> None:
    x = np.random.default_rng(8).exponential(size=5000)
    x[:500] *= 0.1
    y = x.copy()
    y[::3] = np.nan  # TPOT of one-token requests
    assert mser(y).requests > 0
    flat = np.random.default_rng(9).exponential(size=5000)
    both = truncate([flat, x])
    assert both.requests == max(mser(flat).requests, mser(x).requests) == mser(x).requests
    assert not truncate([x, np.arange(5000.0)]).settled
    assert truncate([x, np.arange(5000.0)]).requests == 0


# ---------------------------------------------------------------- the replay


@pytest.fixture(scope="module")
def default():
    plan = parse_plan(read_yaml(str(PLAN)), str(PLAN))
    return build_context(plan.inputs, str(PLAN)), plan


@pytest.mark.unit
def test_plan_schema_states_the_warmup(default) -> None:
    _, plan = default
    sim = plan.plans["pdd"].simulated
    assert sim is not None and sim.warmup is not None and sim.warmup.method == "MSER-5"
    assert sim.warmup.requests + sim.warmup.kept_requests == sim.requests
    d = sim.model_dump()
    assert "note" not in d["warmup"]
    d.pop("warmup")
    assert Simulated.model_validate(d).warmup is None  # plans written before it: no warm-up
