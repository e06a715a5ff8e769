"""cli.common.loading: a command's imports run without the cyclic GC, whose objects are then
frozen out of its later passes; the collector is back on however the block ends."""

from __future__ import annotations

import gc

import pytest

from pdd_plan.cli.common import loading

pytestmark = pytest.mark.unit


def test_imports_run_without_the_collector_and_stay_frozen():
    assert gc.isenabled()
    before = gc.get_freeze_count()
    try:
        with loading():
            assert not gc.isenabled()
            kept = [[i] for i in range(1000)]  # objects made while loading
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + len(kept)  # out of the collector's passes
    finally:
        gc.unfreeze()


def test_the_collector_is_back_on_after_a_failed_import():
    try:
        with pytest.raises(ImportError), loading():
            import pdd_plan.no_such_module  # noqa: F401  (fails inside the block on purpose)
        assert gc.isenabled()
    finally:
        gc.unfreeze()
