"""benchmarks/speed_versus.py's table: medians per case and checkout, from given timings (the
harness itself is run by hand, not in CI)."""

from __future__ import annotations

import pytest

from benchmarks import speed_versus

pytestmark = pytest.mark.unit


def test_table_gives_medians_of_wall_and_both_cpu_figures() -> None:
    times = {
        ("optimize", "other"): [(3.0, 4.0, 3.5, 1.0), (5.0, 4.4, 3.9, 2.0), (4.0, 4.2, 3.7, 1.5)],
        ("optimize", "this"): [(2.0, 4.1, 2.5, 1.2), (2.5, 4.3, 2.7, 1.1)],
    }
    rows = speed_versus.table(times).splitlines()
    assert rows[2] == "| optimize | other | 3 | 4.00 | 3.00 | 4.20 | 3.70 | 1.0-2.0 |"
    # two runs: the medians are their means
    assert rows[3] == "| optimize | this | 2 | 2.25 | 2.00 | 4.20 | 2.60 | 1.1-1.2 |"


def test_cases_are_the_default_with_and_without_its_draws_and_verification() -> None:
    assert speed_versus.CASES == {
        "optimize": [],
        "optimize plain": ["--draws", "0"],
        "--no-verify plain": ["--no-verify", "--draws", "0"],
    }
