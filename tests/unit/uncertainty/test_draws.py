"""Draws: seeded and reproducible, space-filling (one draw per stratum per input), the perf
band's law as the band file's numbers give it, the copula's correlation."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml
from scipy import stats

from pdd_plan.inputs import error_band, profiles
from pdd_plan.inputs.schema.uncertainty import Uncertainty
from pdd_plan.uncertainty import draws

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _wide_spreads(monkeypatch):
    # U(0, 1) draws are their own quantile levels, which is what these tests read; as a factor
    # its 0.1% quantile (0.001) is under the default spread bound's 1/100
    monkeypatch.setenv("PDD_PLAN_MAX_FACTOR_SPREAD", "1000")


def _unc(**inputs) -> Uncertainty:
    return Uncertainty.model_validate({"inputs": inputs})


U01 = {"dist": "uniform", "low": 0.0, "high": 1.0, "source": "assumption"}


def test_same_seed_same_draws_other_seed_other_draws():
    ms, _ = draws.marginals(_unc(kv_bytes=U01, rate=U01), profiles.model("llama-3.1-8b"))
    a, b = draws.draw(ms, 16, 7), draws.draw(ms, 16, 7)
    assert np.array_equal(a.values, b.values)
    assert not np.array_equal(a.values, draws.draw(ms, 16, 8).values)


def test_latin_hypercube_puts_one_draw_in_each_stratum():
    ms, _ = draws.marginals(_unc(kv_bytes=U01, line_rate=U01), profiles.model("llama-3.1-8b"))
    ms = [m for m in ms if m.name in ("kv_bytes", "line_rate")]
    n = 20
    d = draws.draw(ms, n, 3)
    for j in range(2):
        # a uniform(0, 1) input's values are the levels: one in each of the n strata
        assert sorted(np.floor(d.values[:, j] * n).astype(int)) == list(range(n))


def test_marginal_quantiles_are_the_distributions():
    s = {"dist": "triangular", "low": 0.5, "mode": 1.0, "high": 2.0, "source": "assumption"}
    ms, _ = draws.marginals(_unc(kv_bytes=s), profiles.model("llama-3.1-8b"))
    kv = next(m for m in ms if m.name == "kv_bytes")
    # triangular CDF left of the mode: (x - a)^2 / ((b - a)(c - a)) = 0.1 -> x = a + sqrt(0.15)
    assert kv.quantile(0.1) == pytest.approx(0.5 + np.sqrt(0.1 * 1.5 * 0.5), rel=1e-9)
    n = {"dist": "normal", "mean": 1.0, "sd": 0.1, "source": "assumption"}
    ms, _ = draws.marginals(_unc(rate=n), profiles.model("llama-3.1-8b"))
    rate = next(m for m in ms if m.name == "rate")
    assert rate.quantile(0.9) == pytest.approx(1.0 + 0.1 * 1.2815515655, rel=1e-8)


def test_request_state_draws_are_bytes_floored_at_zero():
    # normal(2 MB, 4 MB): P10 is 2e6 - 1.2816 x 4e6 < 0, a byte count floored at 0 (not at
    # the factors' 1%); P90 is the normal's own
    n = {"dist": "normal", "mean": 2e6, "sd": 4e6, "source": "assumption"}
    ms, _ = draws.marginals(_unc(request_state_bytes=n), profiles.model("llama-3.1-8b"))
    st = next(m for m in ms if m.name == "request_state_bytes")
    assert st.kind == "bytes" and st.quantile(0.1) == 0.0
    assert st.quantile(0.9) == pytest.approx(2e6 + 4e6 * 1.2815515655, rel=1e-8)
    d = draws.draw(ms, 16, 0)
    assert np.all(d.values[:, list(d.names).index("request_state_bytes")] >= 0.0)


def test_perf_band_law_reads_the_band_file():
    model = profiles.model("deepseek-v4-pro")
    band = yaml.safe_load(error_band.band_path().read_text())["families"]["moe"]
    m, _ = draws.perf_marginal(model, "decode_speed")
    b, med = band["bias"], band["median_abs_error"]  # the median signed error
    # speed = measured / predicted = 1 / (1 + error): its median is 1 / (1 + bias)
    assert m.quantile(0.5) == pytest.approx(1.0 / (1.0 + b), rel=1e-9)
    # half the draws lie within a factor 1 + median error of the median
    sig, t = m.params["sigma"], np.log1p(med)
    p = stats.norm.cdf(t / sig) - stats.norm.cdf(-t / sig)
    assert p == pytest.approx(0.5, abs=1e-9)


def test_band_sigma_without_bias_is_the_half_normal_median():
    # median |N(0, s)| = 0.6745 s
    assert draws.band_sigma(np.expm1(0.6745 * 0.2)) == pytest.approx(0.2, rel=1e-3)


def test_without_a_section_only_the_perf_band_and_a_note():
    ms, notes = draws.marginals(None, profiles.model("deepseek-v4-pro"))
    assert [m.name for m in ms] == ["prefill_speed", "decode_speed"]
    assert any("perf error band alone" in n for n in notes)


@pytest.mark.parametrize("rho", [1.0, 0.0])
def test_prefill_and_decode_speed_correlation(rho):
    ms, _ = draws.marginals(None, profiles.model("deepseek-v4-pro"))
    d = draws.draw(ms, 256, 1, correlation=rho)
    r = np.corrcoef(np.log(d.values[:, 0]), np.log(d.values[:, 1]))[0, 1]
    # tolerance: 0.15: the sample correlation of 256 draws has standard error (1 - r^2)/sqrt(n) <=
    # 0.0625, so about 2.4 SE
    assert r == pytest.approx(rho, abs=0.15)
    if rho == 1.0:
        assert np.allclose(d.values[:, 0], d.values[:, 1])


def test_iid_draws_are_not_stratified_but_seeded():
    ms, _ = draws.marginals(_unc(kv_bytes=U01), profiles.model("llama-3.1-8b"))
    ms = [m for m in ms if m.name == "kv_bytes"]
    a = draws.draw(ms, 64, 5, iid=True)
    assert np.array_equal(a.values, draws.draw(ms, 64, 5, iid=True).values)
    assert len(set(np.floor(a.values[:, 0] * 64).astype(int))) < 64  # some strata twice


@pytest.mark.parametrize(
    ("spread", "law"),
    [
        ({"dist": "normal", "mean": 1.0, "sd": 0.2}, stats.norm(1.0, 0.2)),
        ({"dist": "lognormal", "median": 0.9, "sigma": 0.3}, stats.lognorm(0.3, scale=0.9)),
        ({"dist": "uniform", "low": 0.6, "high": 1.4}, stats.uniform(0.6, 0.8)),
        (
            {"dist": "triangular", "low": 0.5, "mode": 0.7, "high": 2.0},
            stats.triang(0.2 / 1.5, 0.5, 1.5),
        ),
    ],
)
def test_inverse_cdfs_are_scipys(spread, law):
    # the closed forms (and the stdlib's normal quantile) against scipy.stats, the reference
    ms, _ = draws.marginals(
        _unc(kv_bytes={**spread, "source": "assumption"}), profiles.model("llama-3.1-8b")
    )
    kv = next(m for m in ms if m.name == "kv_bytes")
    u = np.linspace(0.001, 0.999, 41)
    assert np.allclose(kv.value(u), law.ppf(u), rtol=1e-10, atol=1e-12)


def test_copula_below_one_keeps_both_marginals():
    ms, _ = draws.marginals(None, profiles.model("deepseek-v4-pro"))
    d = draws.draw(ms, 64, 2, correlation=0.5)
    # each speed is still a Latin hypercube of its own law: one draw per stratum of its CDF
    for j in range(2):
        sig, med = ms[j].params["sigma"], ms[j].params["median"]
        levels = stats.norm.cdf(np.log(d.values[:, j] / med) / sig)
        assert sorted(np.floor(levels * 64).astype(int)) == list(range(64)) or j == 1


def test_the_block_does_not_import_scipy_stats():
    code = "import sys, pdd_plan.uncertainty; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # its import costs 1-2 s, more than the block's budget
