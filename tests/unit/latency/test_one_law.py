"""One law per concept: a transfer's delay is put together in one place
(:func:`pdd_plan.latency.line.law.transfer_law`), the prefill wait is one protocol both queue
laws implement, chosen once by the pool, and its sum with an exponential line delay is one
function. The merged laws give the numbers the two composition points gave before they were
merged (recorded on the hand-made inputs below), to rounding."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import numpy as np
import pytest

from pdd_plan.inputs import profiles
from pdd_plan.inputs.schema.line import LineSKU
from pdd_plan.latency import ttft
from pdd_plan.latency.line import transfer
from pdd_plan.latency.line.law import transfer_law
from pdd_plan.latency.prefill import gig1, gigc, wait
from pdd_plan.latency.prefill import pool as prefill_pool

pytestmark = pytest.mark.unit

PKG = Path(__file__).resolve().parents[3] / "pdd_plan"


def _sku(**kw) -> LineSKU:
    base = dict(
        name="t", gbps=20, cost_per_month=1, rtt_ms=10, loss_rate=0.0, streams_per_transfer=1
    )
    return LineSKU(**{**base, **kw})


LINES = {
    "eth-1g": lambda: transfer.LineConfig(profiles.line("eth-1g"), 1),
    # one transfer cannot fill the line (the tagged transfer's exact law)
    "capped": lambda: transfer.LineConfig(
        _sku(gbps=1, connections=8, per_connection_gbps=0.3, rtt_ms=5), 1
    ),
    # every transfer at its cap (no processor share: the pool wait's own law)
    "all-capped": lambda: transfer.LineConfig(
        _sku(gbps=10, connections=4, per_connection_gbps=0.5), 2
    ),
}
SIZES = np.array([5e6, 2e7, 2.5e8])
SHARES = np.array([0.5, 0.4, 0.1])
PREFILL_S = np.array([0.2, 0.5, 1.5])

# recorded from line_transfer_s / line_delay_shape composed by transfer_law, before the merge;
# the bursty rows (ca2 != 1) re-recorded when the bursts law took the rest of a burst by
# the PS pairwise min() with each member late by its own prefill (latency/line/bursts.py)
BEFORE_LINE = {
    ("eth-1g", 0.63, 1.0, False, 1.0): {
        "total": [0.13138440801875398, 0.4915228538159425, 6.013645689372834],
        "bare": [0.05444444444444445, 0.1877777777777778, 2.232222222222222],
        "line_wait": [0.07693996357430953, 0.3037450760381647, 3.7814234671506117],
        "line_wait_var": [0.009336049779737232, 0.14258233603593953, 16.59697712563443],
        "atom": [0.338594329515486, 0.25948577234276504, 0.004386312333821952],
    },
    ("capped", 0.63, 4.0, False, 1.0): {
        "total": [0.4024410454966756, 1.2366423576536387, 11.550295731615623],
        "bare": [0.15315153899016207, 0.5976061559606483, 7.412576949508103],
        "line_wait": [0.24928950650651352, 0.6390362016929905, 4.1377187821075205],
        "line_wait_var": [0.13882364998251032, 0.6480411198644696, 12.21935388362019],
        "atom": [0.23434661774211582, 0.1765994727087698, 0.004711684540172008],
    },
    ("all-capped", 0.9, 1.0, False, 1.0): {
        "total": [1.5091252752295583, 1.7757980454118498, 5.864780521540322],
        "bare": [0.09889092339409722, 0.3655636935763889, 4.4545461697048605],
        "line_wait": [1.4102343518354612, 1.410234351835461, 1.4102343518354612],
        "line_wait_var": [3.6809964614535735, 3.680996461453572, 3.6809964614535735],
        "atom": [0.29846700985374275, 0.29846700985374275, 0.29846700985374275],
    },
    ("capped", 0.9, 2.0, True, 1.3): {
        "total": [5.641316567576917, 7.0024895154699625, 25.982259496487202],
        "bare": [0.15315153899016207, 0.5976061559606483, 7.412576949508103],
        "line_wait": [5.488165028586755, 6.404883359509315, 18.5696825469791],
        # the stretched rows' spread and atom re-recorded when the stretch's part of the
        # delay, (stretch - 1) x the bare transfer, became a delay every transfer has
        # (test_a_stretch_delays_every_transfer_and_spreads_only_the_share below)
        "line_wait_var": [14.315709882831996, 16.250265444245784, 51.80615709393231],
        "atom": [0.0, 0.0, 0.0],
    },
    ("eth-1g", 0.3, 2.0, True, 1.3): {
        "total": [0.10639967858727123, 0.3771616417780827, 4.309008417107174],
        "bare": [0.05444444444444445, 0.1877777777777778, 2.232222222222222],
        "line_wait": [0.05195523414282678, 0.1893838640003049, 2.076786194884952],
        "line_wait_var": [0.004189518162173045, 0.055697965881474965, 3.461004298020849],
        "atom": [0.0, 0.0, 0.0],
    },
}

# recorded from PrefillPool.single_law / wait_law and ttft._wait_plus_exponential, before
# the merge: (instances, req/s, arrival ca2) over services 0.2 / 0.6 s at equal shares
BEFORE_TTFT = {
    (1, 1.5, 1.0): {
        "exp/None": [
            1.0,
            0.5995192972206234,
            0.5726905238492299,
            0.40395746438022123,
            0.16679424531213827,
            0.01788526509858001,
        ],
        "exp/0.2": [
            1.0,
            1.0,
            0.9079847266575961,
            0.5930580955306978,
            0.2537927717579605,
            0.028704450349404956,
        ],
        "shape/0.2": [
            1.0,
            0.8283654130945529,
            0.7852504390412521,
            0.5755412259169896,
            0.27284589221890815,
            0.034705416914599975,
        ],
        "quantiles": [0.9873976004970063, 2.207970008755995, 3.740894602540865],
    },
    (1, 1.2, 4.0): {
        "exp/None": [
            1.0,
            0.7727077099787203,
            0.7727077099787203,
            0.6523357451168678,
            0.4361408637047253,
            0.1815529182995386,
        ],
        "exp/0.2": [
            1.0,
            1.0,
            0.9497231234333858,
            0.7705053591604228,
            0.5411967736649085,
            0.21702522250724865,
        ],
        "shape/0.2": [
            1.0,
            0.9025890185623087,
            0.8852989459804665,
            0.7561870504933526,
            0.5345091949756606,
            0.22086759788801225,
        ],
        "quantiles": [1.5299334157411375, 3.7590923954660522, 6.80362151838624],
    },
    (2, 4.0, 1.0): {
        "exp/None": [
            1.0,
            0.7111111111111111,
            0.7007778477903036,
            0.45872773573751663,
            0.19656412987409336,
            0.02571476225929311,
        ],
        "exp/0.2": [
            1.0,
            1.0,
            0.9358775485444017,
            0.6583702384043946,
            0.2944453448793045,
            0.03889482212516342,
        ],
        "shape/0.2": [
            1.0,
            0.8761904761904762,
            0.8497137940754744,
            0.6280308429384069,
            0.30933128765719786,
            0.045488949607554195,
        ],
        "quantiles": [1.0624286609682942, 2.322587273539746, 3.9145638603826525],
    },
    (3, 4.0, 2.0): {
        "exp/None": [
            1.0,
            0.3713831023341094,
            0.3713831023341094,
            0.15779528001872484,
            0.024769635199296272,
            0.0002910054049231197,
        ],
        "exp/0.2": [
            1.0,
            1.0,
            0.8609504344882222,
            0.4147620348255472,
            0.07961355289672187,
            0.001082736868211945,
        ],
        "shape/0.2": [
            1.0,
            0.7305927581431898,
            0.6827740143318706,
            0.3954771490133541,
            0.11435597988664295,
            0.004477867634765999,
        ],
        "quantiles": [0.8, 1.71642619252532, 3.0414485485414025],
    },
    (1, 6.0, 1.0): {
        "exp/None": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "exp/0.2": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "shape/0.2": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        "quantiles": [12163481.6, 12163481.6, 12163481.6],
    },
}
SLACK = np.array([-0.1, 0.0, 0.05, 0.3, 0.8, 2.0])


@pytest.mark.parametrize("key", sorted(BEFORE_LINE))
def test_transfer_law_gives_the_numbers_of_the_two_composition_points(key):
    name, rho, ca2, fed, stretch = key
    feed = prefill_pool.PrefillPool(None, 3, PREFILL_S, 4.0, SHARES, 2.0) if fed else None
    law = transfer_law(
        SIZES, SHARES, LINES[name](), rho, stretch, ca2, feed, PREFILL_S if fed else None
    )
    # tolerance: 1e-12, the pins' own rounding; fed by a pool, 1e-9: the pool's busy-time
    # variance is now the infinite M/M/c chain's, inverted to ~1e-10 (latency/laplace.py), where
    # the pins were taken on a chain truncated at 1e-9 of its stationary mass (moved 3e-11)
    rtol = 1e-9 if fed else 1e-12
    for field, want in BEFORE_LINE[key].items():
        np.testing.assert_allclose(getattr(law, field), want, rtol=rtol, err_msg=field)


@pytest.mark.parametrize("name", sorted(LINES))
def test_a_stretch_delays_every_transfer_and_spreads_only_the_share(name):
    """Verification's stretch s makes a transfer s times the law's: the delay beyond the bare
    time gains (s - 1) x the bare transfer (after the setup and copy), which every transfer
    has (no atom at zero), while the spread stays the share's, its delay times s: the variance
    is the unstretched law's squared CV on s x the unstretched delay."""
    line, s = LINES[name](), 1.37
    plain = transfer_law(SIZES, SHARES, line, 0.5)
    got = transfer_law(SIZES, SHARES, line, 0.5, s)
    pre = line.pre_line_s(SIZES)
    np.testing.assert_allclose(got.bare, plain.bare, rtol=1e-12)
    np.testing.assert_allclose(
        got.line_wait, (s - 1.0) * (plain.bare - pre) + s * plain.line_wait, rtol=1e-12
    )
    cv2 = np.divide(
        plain.line_wait_var,
        plain.line_wait**2,
        out=np.zeros_like(SIZES),
        where=plain.line_wait > 0,
    )
    np.testing.assert_allclose(
        got.line_wait_var, cv2 * (s * plain.line_wait) ** 2, rtol=1e-9, atol=1e-300
    )
    assert np.all(got.atom == 0.0)


def test_a_stretched_line_with_no_share_misses_alike_at_every_load():
    """Every transfer at its cap and the pool not binding (below ~0.2 of this line: no share
    and no wait to shape): stretched, its delay is the stretch's alone, the same at every
    load, so the TTFT miss of a request whose delay alone passes the target is 1 at every
    load (it flipped between 0.5 and 1e-17 with the load's last bits where the stretch took
    the share's shape: an atom of 1 with a squared CV of 1, or an ulp of share over, ~1e17)."""
    line = LINES["all-capped"]()
    pool = prefill_pool.PrefillPool(None, 3, PREFILL_S, 0.01, SHARES, 1.0)
    misses = []
    for rho in np.geomspace(1e-3, 0.2, 40):
        law = transfer_law(SIZES, SHARES, line, float(rho), 1.37)
        assert np.all(law.atom == 0.0) and np.all(law.line_wait > 0)
        # the target 10% under the largest transfer's delay (its spread here: under 10 ms)
        sla = float(law.line_wait[2]) * 0.9
        misses.append(
            ttft.ttft_survival(
                np.array([sla]), pool, law.line_wait[2:], law.line_wait_var[2:], law.atom[2:]
            )[0]
        )
    assert min(misses) > 0.99, misses


@pytest.mark.parametrize("key", sorted(BEFORE_TTFT))
def test_ttft_law_gives_the_numbers_of_the_two_convolutions(key):
    count, rate, ca2 = key
    pool = prefill_pool.PrefillPool(None, count, np.array([0.2, 0.6]), rate, np.full(2, 0.5), ca2)
    m = np.full_like(SLACK, 0.2)
    before = BEFORE_TTFT[key]
    np.testing.assert_allclose(ttft.ttft_survival(SLACK, pool), before["exp/None"], rtol=1e-12)
    np.testing.assert_allclose(ttft.ttft_survival(SLACK, pool, m), before["exp/0.2"], rtol=1e-12)
    shaped = ttft.ttft_survival(SLACK, pool, m, m**2 * 2.5, np.full_like(SLACK, 0.3))
    np.testing.assert_allclose(shaped, before["shape/0.2"], rtol=1e-12)
    q = ttft.ttft_quantiles(
        np.array([0.3, 0.8]),
        np.full(2, 0.5),
        pool,
        (0.5, 0.9, 0.99),
        np.array([0.1, 0.4]),
        np.array([0.02, 0.3]),
        np.array([0.2, 0.1]),
    )
    # the searches stop within QUANTILE_REL_TOL of their answer (the figures were to one ulp)
    np.testing.assert_allclose(q, before["quantiles"], rtol=2 * ttft.QUANTILE_REL_TOL)


def test_the_expansion_plus_an_exponential_by_hand():
    # an atom 1 - p at 0 and p (t0 + Exp(a)); E ~ Exp(b): P(W + E > t) =
    # (1 - p) e^(-b t) + p [1 before t0; (b e^(-a u) - a e^(-b u)) / (b - a), u = t - t0]
    law = gigc.ExpansionWait(0.4, 0.6, 2.0)  # gamma > p: t0 = ln(1.5) / 2
    p, a, t0, b = 0.4, 2.0, np.log(1.5) / 2.0, 1 / 0.3
    t = np.array([0.1, 0.5, 1.0, 3.0])
    u = np.maximum(t - t0, 0.0)
    conv = np.where(t < t0, 1.0, (b * np.exp(-a * u) - a * np.exp(-b * u)) / (b - a))
    want = (1 - p) * np.exp(-b * t) + p * conv
    got = wait.wait_plus_exponential_survival(law, t, np.full(4, 0.3))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # its mean: p (t0 + 1 / a); no line delay: the law's own survival
    assert law.mean == pytest.approx(p * (t0 + 1 / a), rel=1e-12)
    np.testing.assert_allclose(wait.wait_plus_exponential_survival(law, t), law.survival(t))


def test_both_laws_are_points_and_a_tail_that_sum_to_one():
    exact = gig1.gi_g1_wait(np.array([0.2, 0.6]), np.full(2, 0.5), 1.5, 1.0)
    pooled = gigc.ggc_wait_law(3, 4.0, np.array([0.2, 0.6]), np.full(2, 0.5), 2.0)
    for law in (exact, pooled):
        total = float(np.sum(law.weights)) + law.tail.mass
        assert total == pytest.approx(1.0, abs=1e-12)
        assert float(law.weights[0]) == pytest.approx(1.0 - law.wait_probability, abs=1e-12)
        tail_mean = law.tail.mass * (law.tail.shift + 1 / law.tail.rate)
        assert float(law.points @ law.weights) + tail_mean == pytest.approx(law.mean, rel=1e-9)


@functools.cache
def _functions() -> tuple[str, ...]:
    """Every function defined in the package, as 'module path:name' (parsed once a session)."""
    return tuple(
        f"{p.relative_to(PKG)}:{node.name}"
        for p in sorted(PKG.rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    )


def test_one_wait_plus_exponential_function():
    found = [f for f in _functions() if re.search(r"plus_exp", f.split(":")[1])]
    assert found == ["latency/prefill/wait.py:wait_plus_exponential_survival"], found


def test_no_single_law_branch_left():
    hits = [
        str(p.relative_to(PKG))
        for p in PKG.rglob("*.py")
        if "single_law" in p.read_text(encoding="utf-8")
    ]
    assert not hits, f"single_law in {hits}"
    pool = prefill_pool.PrefillPool(None, 2, np.array([0.2, 0.6]), 2.0, np.full(2, 0.5))
    assert not hasattr(pool, "single_law")


def test_one_line_delay_composition():
    # the limited-PS mean and shape are ingredients only: no second public composer of them
    names = {f.split(":")[1] for f in _functions()}
    assert not names & {"line_transfer_s", "line_delay_shape"}
