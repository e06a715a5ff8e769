"""The bundled examples give the committed outputs byte for byte (tests/golden/make.py wrote
them): optimize (verified, YAML; and the table), report, simulate on each architecture, emit.
A refactor must not move a byte; a change that means to alter plans regenerates them."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.golden, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("golden_make", HERE / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


@pytest.mark.parametrize("example", make.EXAMPLES)
def test_example_outputs_match_golden(example, tmp_path):
    got = make.outputs(example, tmp_path)
    for name, text in got.items():
        want = (HERE / name).read_text(encoding="utf-8")
        if text != want:
            diff = difflib.unified_diff(
                want.splitlines(), text.splitlines(), "golden", "now", lineterm="", n=1
            )
            pytest.fail(f"{name} differs from golden:\n" + "\n".join(list(diff)[:60]))
