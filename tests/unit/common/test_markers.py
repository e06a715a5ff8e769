"""The marker gate (tests/markers.py, run by tests/conftest.py on every collection): a test is
marked with its folder's kind, and a marker contradicting the folder is named."""

from __future__ import annotations

import pytest

from tests import markers

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "nodeid,marks",
    [
        ("tests/unit/sim/test_x.py::test_a", {"unit"}),
        ("tests/integration/test_x.py::test_a[1]", {"integration"}),
        ("tests/integration/test_x.py::test_a", {"integration", "slow", "parametrize"}),
        ("tests/golden/test_golden.py::test_a", {"golden", "slow"}),
        ("tests/integration/test_x.py::test_a", {"slow"}),  # the folder marks it integration
        ("tests/unit/sim/test_x.py::test_a", set()),  # the folder marks it unit
    ],
)
def test_markers_matching_the_folder_pass(nodeid, marks):
    assert markers.mismatch(nodeid, marks) is None


@pytest.mark.parametrize(
    "nodeid,marks,says",
    [
        ("tests/unit/sim/test_x.py::test_a", {"integration"}, "marked integration"),
        ("tests/unit/sim/test_x.py::test_a", {"unit", "slow"}, "marked slow"),
        ("tests/unit/sim/test_x.py::test_a", {"unit", "golden"}, "marked golden"),
        ("tests/integration/test_x.py::test_a", {"unit"}, "marked unit"),
        ("tests/integration/test_x.py::test_a", {"integration", "golden"}, "marked golden"),
        ("tests/golden/test_golden.py::test_a", {"unit", "golden"}, "marked unit"),
        ("tests/test_loose.py::test_a", {"unit"}, "not under tests/"),
    ],
)
def test_a_contradiction_is_named(nodeid, marks, says):
    why = markers.mismatch(nodeid, marks)
    assert why is not None and why.startswith(nodeid) and says in why


@pytest.mark.parametrize(
    "nodeid,kind",
    [
        ("tests/unit/sim/test_x.py::test_a[1-2]", "unit"),
        ("tests/integration/test_x.py::test_a", "integration"),
        ("tests/golden/test_golden.py::test_a", "golden"),
        ("tests/test_loose.py::test_a", None),
        ("tests/unitx/test_x.py::test_a", None),
    ],
)
def test_the_folder_gives_the_kind(nodeid, kind):
    assert markers.folder_kind(nodeid) == kind


def test_this_session_was_marked_by_folder(request):
    """The hook ran on this very collection: this test, under tests/unit, carries `unit`."""
    assert request.node.get_closest_marker("unit") is not None
