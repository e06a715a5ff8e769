"""pdd_plan.common.atomic: whole files or none, ordinary permissions, one-line errors."""

from __future__ import annotations

import os
import stat

import pytest

from pdd_plan.cli import common
from pdd_plan.common.atomic import atomic_open, write_atomic
from pdd_plan.common.errors import InputError

pytestmark = pytest.mark.unit


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_text_and_bytes(tmp_path, umask_022):
    p = tmp_path / "a.yaml"
    write_atomic(p, "x: §1\n")
    assert p.read_bytes() == "x: §1\n".encode()
    write_atomic(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    assert _mode(p) == 0o644  # not mkstemp's 0600
    write_atomic(tmp_path / "run.sh", "#!/bin/sh\n", executable=True)
    assert _mode(tmp_path / "run.sh") == 0o755
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.yaml", "run.sh"]


def test_failure_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "plan.yaml"
    p.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_open(p) as f:
        f.write("half")
        raise RuntimeError("interrupted")
    assert p.read_text() == "old\n"
    assert [x.name for x in tmp_path.iterdir()] == ["plan.yaml"]


def test_missing_folder_is_one_input_error(tmp_path):
    with pytest.raises(InputError, match="folder does not exist"):
        write_atomic(tmp_path / "no" / "x.txt", "x")


def test_cli_uses_the_same_helper():
    assert common.write_atomic is write_atomic
