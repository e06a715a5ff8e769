"""The held-out error band: read from data/calibration/error_band.yaml by model family, carried
by `perf --format json` and its table, `null` with a note (never a made-up number) without the
file, and a malformed file turned into a one-line error."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from pdd_plan.common.errors import InputError
from pdd_plan.inputs import error_band, profiles

BAND = {
    "basis": "leave-one-source-out",
    "date": "2026-11-30",
    "families": {
        "dense": {
            "median_abs_error": 0.071,
            "p90_abs_error": 0.14,
            "max_abs_error": 0.22,
            "rows": 14,
        },
        "moe": {
            "median": 0.12,
            "p90": 0.27,
            "max": 0.33,
            "rows": [11, 12, 13, 14, 15],
            "mean_signed_error": -0.04,
        },
    },
}


def _write(tmp_path, data) -> object:
    p = tmp_path / "error_band.yaml"
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


@pytest.mark.unit
def test_family_from_the_model_profile():
    assert error_band.family(profiles.model("llama-3.1-70b")) == "dense"
    assert error_band.family(profiles.model("qwen3-32b")) == "dense"
    assert error_band.family(profiles.model("deepseek-v3")) == "moe"
    assert error_band.family(profiles.model("qwen3-235b-a22b")) == "moe"


@pytest.mark.unit
def test_band_picked_by_family(tmp_path):
    p = _write(tmp_path, BAND)
    band, note = error_band.band_for_model(profiles.model("llama-3.1-8b"), p)
    assert band == {
        "family": "dense",
        "median_abs_error": 0.071,
        "p90_abs_error": 0.14,
        "max_abs_error": 0.22,
        "mean_signed_error": None,
        "bias": None,
        "rows": 14,
        "basis": "leave-one-source-out",
        "date": "2026-11-30",
    }
    assert "median 7%" in note and "at most 22%" in note and "14 rows" in note
    band, note = error_band.band_for_model(profiles.model("deepseek-v3"), p)
    # short key names, and rows given as the list of held-out rows
    assert (band["family"], band["median_abs_error"], band["max_abs_error"]) == ("moe", 0.12, 0.33)
    assert band["rows"] == 5
    # the bias travels with the band and its sign is said: - is pessimistic
    assert band["mean_signed_error"] == -0.04 and "mean signed error -4%" in note


@pytest.mark.unit
def test_regime_band_where_it_has_rows_else_the_familys(tmp_path):
    fam = {"median_abs_error": 0.1, "max_abs_error": 0.5, "rows": 40, "bias": 0.02}
    small = {"median_abs_error": 0.2, "max_abs_error": 0.6, "rows": 9, "bias": -0.08}
    thin = {"median_abs_error": 0.01, "max_abs_error": 0.01, "rows": 2, "bias": 0.0}
    data = {
        "families": {"moe": fam},
        "regimes": {"moe": {"small_batch_decode": small, "long_context_prefill": thin}},
    }
    p = _write(tmp_path, data)
    v3 = profiles.model("deepseek-v3")
    band, note = error_band.band_for_model(v3, p, regime="small_batch_decode")
    assert band["median_abs_error"] == 0.2 and band["bias"] == -0.08
    assert "small_batch_decode" in note and "median signed -8%" in note
    # two rows do not speak for a regime: the family's band does
    band, _ = error_band.band_for_model(v3, p, regime="long_context_prefill")
    assert band["median_abs_error"] == 0.1 and "regime" not in band
    assert error_band.band_for_model(v3, p)[0]["rows"] == 40
    with pytest.raises(InputError, match="regimes.gpu"):
        error_band.parse_bands({"families": {"moe": fam}, "regimes": {"gpu": {}}}, "f.yaml")


@pytest.mark.unit
def test_families_at_the_top_level_and_a_missing_family(tmp_path):
    p = _write(tmp_path, {"dense": BAND["families"]["dense"]})
    band, _ = error_band.band_for_model(profiles.model("qwen3-32b"), p)
    assert band["basis"] == "leave-one-source-out" and "date" not in band
    band, note = error_band.band_for_model(profiles.model("kimi-k2"), p)
    assert band is None and "no error band for moe" in note


@pytest.mark.unit
def test_no_file_no_numbers(tmp_path):
    band, note = error_band.band_for_model(profiles.model("deepseek-v3"), tmp_path / "none.yaml")
    assert band is None and "error_band.yaml is not there" in note


@pytest.mark.unit
@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"families": {"dense": {"max_abs_error": 0.2, "rows": 3}}}, "dense.median_abs_error"),
        ({"families": {"dense": {"median": "7%", "max": 0.2, "rows": 3}}}, "dense.median"),
        ({"families": {"dense": {"median": -0.1, "max": 0.2, "rows": 3}}}, "dense.median"),
        ({"families": {"moe": {"median": 0.1, "max": 0.2, "rows": 0}}}, "moe.rows"),
        ({"families": {"moe": [0.1, 0.2]}}, "moe"),
        ({"families": [1, 2]}, "families"),
        ("- just\n- a list\n", None),
    ],
)
def test_malformed_band_file(tmp_path, data, field):
    p = _write(tmp_path, data)
    with pytest.raises(InputError) as e:
        error_band.load_bands(p)
    assert e.value.file == str(p) and e.value.field == field


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("families: {dense: [1, 2\n", "YAML syntax error at line 2"),  # unclosed
        ("families: {}\nfamilies: {}\n", "key 'families' given twice"),  # the later would win
        (b"families: \xff\n", "cannot read"),  # not UTF-8
    ],
)
def test_an_unreadable_band_file_is_one_line_naming_it(tmp_path, text, what):
    p = tmp_path / "band.yaml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InputError, match=what) as e:
        error_band.load_bands(p)
    assert e.value.file == str(p) and "\n" not in str(e.value)


@pytest.mark.unit
def test_a_rewritten_file_is_read_again(tmp_path):
    p = _write(tmp_path, BAND)
    assert error_band.load_bands(p)["dense"]["max_abs_error"] == 0.22
    data = json.loads(json.dumps(BAND))
    data["families"]["dense"]["max_abs_error"] = 0.3
    p.write_text(yaml.safe_dump(data))
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert error_band.load_bands(p)["dense"]["max_abs_error"] == 0.3


@pytest.mark.unit
def test_plans_are_centred_on_the_median_signed_error(tmp_path, monkeypatch):
    from pdd_plan.uncertainty import draws

    # one row at +526 % drags the mean to +12 %; the median signed error stays at -2 %
    fam = {"median_abs_error": 0.13, "max_abs_error": 5.26, "rows": 37}
    p = _write(tmp_path, {"families": {"moe": {**fam, "mean_signed_error": 0.12, "bias": -0.02}}})
    monkeypatch.setattr(error_band, "band_path", lambda: p)
    m, _ = draws.perf_marginal(profiles.model("deepseek-v3"), "decode_speed")
    assert m.params["median"] == pytest.approx(1 / 0.98)  # speed = 1 / (1 + error)
    p2 = _write(tmp_path, {"families": {"moe": {**fam, "mean_signed_error": 0.12}}})
    monkeypatch.setattr(error_band, "band_path", lambda: p2)
    m, _ = draws.perf_marginal(profiles.model("deepseek-v3"), "decode_speed")
    assert m.params["median"] == pytest.approx(1 / 1.12)  # no median in the file: the mean
