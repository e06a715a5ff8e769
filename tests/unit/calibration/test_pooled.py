"""The pooled estimate for a GPU without calibration rows (issue 12, held-out max error):
the row-weighted median of the factors fitted on the GPUs that have rows of the same family."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from pdd_plan.calibration import fit as cal
from pdd_plan.calibration import pooled

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_weighted_median_by_hand():
    # [0.3, 0.6, 0.6, 0.9] -> 0.6
    assert pooled.weighted_median([0.3, 0.6, 0.9], [1, 2, 1]) == pytest.approx(0.6)
    # [0.3, 0.3, 0.3, 0.6, 0.9] -> 0.3: the GPU with three rows outvotes the other two
    assert pooled.weighted_median([0.3, 0.6, 0.9], [3, 1, 1]) == pytest.approx(0.3)
    # even total: the mean of the middle two, as an ordinary median
    assert pooled.weighted_median([0.2, 0.4], [1, 1]) == pytest.approx(0.3)
    # a median, not a mean: one far-off GPU does not move it
    assert pooled.weighted_median([0.5, 0.5, 50.0], [1, 1, 1]) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "values,weights", [([], []), ([0.1], [1, 2]), ([0.1], [0]), ([0.1], [1.5])]
)
def test_weighted_median_bad_input(values, weights):
    with pytest.raises(ValueError):
        pooled.weighted_median(values, weights)


FITS = {
    "a": {"mfu": 0.4, "mbu": 0.8},
    "b": {"mfu": 0.6, "mbu": 0.9},
    "c": {"mfu": 0.9, "mbu": 0.7},
}


def test_pooled_factors_by_hand():
    got = pooled.pooled_factors(FITS, {"a": 3, "b": 2, "c": 1})
    # mfu: [.4 .4 .4 .6 .6 .9] -> (.4 + .6) / 2; mbu: [.7 .8 .8 .8 .9 .9] -> .8
    assert got == pytest.approx({"mfu": 0.5, "mbu": 0.8})
    # weight 0 leaves a GPU out; nothing left -> nothing pooled
    assert pooled.pooled_factors(FITS, {"a": 0, "c": 2}) == pytest.approx({"mfu": 0.9, "mbu": 0.7})
    assert pooled.pooled_factors(FITS, {}) == {}


def _row(gpu, family):
    return SimpleNamespace(gpu=gpu, family=family)


def test_family_pool_uses_rows_of_the_same_family_else_all():
    rows = [_row("a", "dense")] * 3 + [_row("b", "moe")] * 2 + [_row("c", "moe")]
    moe, note = pooled.family_pool(FITS, rows, "moe")
    # b twice, c once: mfu [.6 .6 .9] -> .6, mbu [.7 .9 .9] -> .9; a (dense) left out
    assert moe == pytest.approx({"mfu": 0.6, "mbu": 0.9})
    assert "2 GPUs" in note and "3 moe rows" in note
    dense, _ = pooled.family_pool(FITS, rows, "dense")
    assert dense == pytest.approx(FITS["a"])
    # a family no GPU has rows of: the median over all six rows
    other, note = pooled.family_pool(FITS, [r for r in rows if r.family == "moe"], "dense")
    assert other == pytest.approx({"mfu": 0.6, "mbu": 0.9}) and "moe" not in note
    # rows on GPUs without a fit do not count; no fits at all -> nothing
    assert pooled.family_pool({}, rows, "moe") == ({}, "")


def _load_accuracy():
    return importlib.import_module("benchmarks.accuracy")


def test_gpu_without_rows_gets_the_pool(tmp_path):
    # rows 1, 3 (H100) and 5 (H200) of the bundled CSV, parsed from its text: train on H100's
    # two rows; H200 has none, so it is predicted with H100's fitted factors (a pool of one GPU)
    lines = (cal.calibration_dir() / "calibration_measurements.csv").read_text().splitlines()
    small = tmp_path / "m.csv"
    small.write_text("\n".join([lines[0], lines[1], lines[3], lines[5]]) + "\n")
    rows = cal.read_rows(small)[0]
    train = [r for r in rows if r.gpu == "h100"]
    (r5,) = [r for r in rows if r.gpu == "h200"]
    analytic = {g: cal.analytic_gpu(g) for g in ("h100", "h200")}
    fitted = cal.fit(train, analytic["h100"]).factors
    factors, _ = pooled.family_pool({"h100": fitted}, train, r5.family)
    assert factors == pytest.approx(fitted)
    acc = _load_accuracy()
    fits = acc._fit_all(train, analytic, {})
    prof, note = acc._profile(r5, train, fits, analytic, pool=True)
    assert note.startswith("pooled") and prof.efficiency.mode == "calibrated"
    for k, v in fitted.items():
        assert getattr(prof.efficiency, k) == pytest.approx(v)
    # the peaks stay H200's own: only the efficiency fractions are carried over
    assert prof.compute == analytic["h200"].compute
    no_pool, note = acc._profile(r5, train, fits, analytic, pool=False)
    assert note.startswith("analytic") and no_pool == analytic["h200"]
    assert cal.predict(r5, prof) != pytest.approx(cal.predict(r5, no_pool))
