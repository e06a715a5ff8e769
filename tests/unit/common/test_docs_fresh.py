"""The documents' figures are what their harnesses measured: every generated block in
BENCHMARKS.md and docs/validation.md is the rendering of its stored result
(benchmarks/results/NAME.json), the cheap harnesses rerun to the figures they stored, and
BENCHMARKS.md keeps no history (that is CHANGELOG.md's)."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
import sys

import pytest

from benchmarks import render, results

pytestmark = pytest.mark.unit

# harnesses that are deterministic and take a second or two: the test reruns them and the
# stored output must be what they print now (a change to the model that moves a figure then
# fails here until `python -m benchmarks.store NAME` is rerun)
CHEAP = {"tcp_check": [], "h200_kernel_rows": []}


def _doc(rel: str) -> str:
    return (results.ROOT / rel).read_text(encoding="utf-8")


@pytest.mark.parametrize("rel", render.DOCS)
def test_every_generated_block_is_its_stored_result(rel):
    text = _doc(rel)
    assert render.blocks(text), f"{rel} has no generated block"
    assert render.rendered(text) == text, (
        f"{rel} drifted from benchmarks/results/*.json: python -m benchmarks.render "
        "(or rerun the harness: python -m benchmarks.store NAME)"
    )


def test_every_stored_result_is_rendered_somewhere_and_stamped():
    used = {name for rel in render.DOCS for name, _ in render.blocks(_doc(rel))}
    stored = {p.stem for p in results.RESULTS.glob("*.json")}
    assert stored == used, f"stored but not rendered: {stored - used}; rendered: {used - stored}"
    for name in stored:
        data = results.load(name)
        assert data["command"].startswith(f"python -m benchmarks.{name}")
        # a carried measurement may know its day only; a stored run knows its minute
        day_only = r"\d{4}-\d\d-\d\d" if data.get("carried") else "$^"
        assert re.fullmatch(rf"\d{{4}}-\d\d-\d\d \d\d:\d\d UTC|{day_only}", data["date"]), data[
            "date"
        ]
        assert "cores" in data["machine"]


def test_the_validation_table_is_the_accuracy_harness_rows():
    """An independent recount: the validation table's `all` row is the stored rows' held-out
    median and max |error|, computed here with the standard library."""
    data = results.load("accuracy")
    errs = sorted(abs(r["err"]["held_out"]) for r in data["rows"])
    n = len(errs)
    median = (errs[(n - 1) // 2] + errs[n // 2]) / 2
    line = next(ln for ln in _doc("docs/validation.md").splitlines() if ln.startswith("| all |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == str(n)
    assert cells[2] == f"{median:.1%}" and cells[3] == f"{errs[-1]:.1%}"


# runpy warns that the rendering above imported the harness already: it runs it afresh anyway
@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
@pytest.mark.parametrize("name", sorted(CHEAP))
def test_cheap_harnesses_still_print_their_stored_figures(name, monkeypatch):
    monkeypatch.setattr(sys, "argv", [f"benchmarks/{name}.py", *CHEAP[name]])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        runpy.run_module(f"benchmarks.{name}", run_name="__main__")
    assert out.getvalue() == results.load(name)["output"], (
        f"benchmarks/{name}.py prints other figures now: python -m benchmarks.store {name}"
    )


def test_a_hand_edit_inside_a_block_is_caught():
    text = _doc("docs/validation.md")
    (start,) = [m.end(1) for m in render.BLOCK.finditer(text)][:1]
    edited = text[:start] + "| all | 1 |\n" + text[start:]
    assert render.rendered(edited) != edited
    assert render.rendered(render.rendered(edited)) == render.rendered(edited) == text


def test_benchmarks_keeps_current_figures_only():
    """History (before/after, earlier rounds) belongs in CHANGELOG.md."""
    text = _doc("BENCHMARKS.md")
    hits = re.findall(
        r"perf v[0-9] \(the model of|\(was [^)]*\)|history of this check|^\| before ", text, re.M
    )
    assert not hits, hits


def test_the_shipped_error_band_is_the_stored_rows_band():
    """The band plans carry (data/calibration/error_band.yaml, `accuracy --write-band`) is the
    one the documents show: the same rows give the same figures, family and regime."""
    import yaml

    from benchmarks import accuracy
    from pdd_plan.calibration.fit import calibration_dir

    band = yaml.safe_load((calibration_dir() / "error_band.yaml").read_text(encoding="utf-8"))
    data = results.load("accuracy")
    stored = yaml.safe_load(accuracy.band_yaml(data["rows"], band["date"], data["csv"]))
    assert band["families"] == stored["families"] and band["regimes"] == stored["regimes"], (
        "the error band and benchmarks/results/accuracy.json differ: "
        "python -m benchmarks.accuracy --store --write-band --date YYYY-MM-DD"
    )


def test_every_measured_table_in_benchmarks_is_generated():
    """No section keeps a hand-written table or printed output: each is a block rendered from
    its harness's stored result (carried ones say so in their first line)."""
    text = render.BLOCK.sub("", _doc("BENCHMARKS.md"))
    hand = [
        sec.splitlines()[0]
        for sec in re.split(r"\n(?=## )", text)
        if "\n|---" in sec or "\n```" in sec
    ]
    assert not hand, f"hand-written tables in: {hand}"
