"""The markers follow the folders: tests/conftest.py marks each test with its folder's kind and
fails collection, naming the test, where a marker contradicts the folder.

- tests/unit: ``unit``, nothing else: pure functions, fast (``pytest -m unit`` in under a minute).
- tests/integration: ``integration``, and ``slow`` where it is long: end to end, through the CLI,
  a simulator replay, or the whole optimizer on a scenario.
- tests/golden: ``golden`` (and ``slow``): byte snapshots of the commands' output.

So ``-m unit`` selects exactly tests/unit, and a test written under tests/unit cannot be
excluded from it (nor a slow one hide there) by a marker.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

KINDS = ("unit", "integration", "golden")  # one per folder, named as the folder
ALLOWED = {
    "unit": frozenset({"unit"}),
    "integration": frozenset({"integration", "slow"}),
    "golden": frozenset({"golden", "slow"}),
}
CHECKED = frozenset(KINDS) | {"slow"}


def folder_kind(nodeid: str) -> str | None:
    """The kind a test's folder gives it: 'tests/unit/x/test_y.py::t' -> 'unit'."""
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    if len(parts) >= 3 and parts[0] == "tests" and parts[1] in KINDS:
        return parts[1]
    return None


def mismatch(nodeid: str, markers: Iterable[str]) -> str | None:
    """Why a test's markers contradict its folder, or None when they do not."""
    kind = folder_kind(nodeid)
    if kind is None:
        return f"{nodeid}: not under tests/{{{','.join(KINDS)}}}/"
    extra = (set(markers) & CHECKED) - ALLOWED[kind]
    if extra:
        return f"{nodeid}: in tests/{kind}/ but marked {', '.join(sorted(extra))}"
    return None
