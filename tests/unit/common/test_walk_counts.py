"""benchmarks/walk.py's counts on walks small enough to count by hand."""

from __future__ import annotations

import sys

import pytest

from benchmarks.walk import Tracer, Walk

pytestmark = pytest.mark.unit


def test_stays_merge_repeats_and_returns_count_modules_left_before():
    w = Walk(("a", "a", "b", "a", "c", "c", "a", "b"))
    assert w.stays == ("a", "b", "a", "c", "a", "b")
    assert w.modules == 3
    assert w.returns == 3  # a (after b), a (after c), b (after a)


def _module(name: str, src: str, env: dict) -> dict:
    g = {"__name__": name, **env}
    exec(compile(src, f"<{name}>", "exec"), g)
    return g


def test_the_tracer_follows_first_calls_and_sees_an_upcall():
    # pkg.top.run -> pkg.low.f (-> pkg.top.helper: an upcall) -> back; pkg.low.f again (read
    # before: skipped); pkg.low.g -> back
    top: dict = {}
    low = _module(
        "pkg.low",
        "def f():\n    return TOP['helper']()\n\ndef g():\n    return 1\n",
        {"TOP": top},
    )
    top.update(
        _module(
            "pkg.top",
            "def helper():\n    return 2\n\n"
            "def run():\n    return LOW['f']() + LOW['f']() + LOW['g']() + len([1])\n",
            {"LOW": low},
        )
    )
    t = Tracer("pkg")
    sys.setprofile(t)
    try:
        assert top["run"]() == 6
    finally:
        sys.setprofile(None)
    # run, f, helper, back to f, back to run, g, back to run
    assert t.steps == ["pkg.top", "pkg.low", "pkg.top", "pkg.low", "pkg.top", "pkg.low", "pkg.top"]
    assert t.upcalls == 1
    w = Walk(tuple(t.steps), t.upcalls)
    assert (len(w.stays), w.modules, w.returns) == (7, 2, 5)


def test_frames_outside_the_package_are_transparent():
    inner = _module("pkg.inner", "def cb(x):\n    return x + 1\n", {})
    outer = _module(
        "pkg.outer", "def run():\n    return sorted(map(CB, [2, 1]))\n", {"CB": inner["cb"]}
    )
    t = Tracer("pkg")
    sys.setprofile(t)
    try:
        outer["run"]()
    finally:
        sys.setprofile(None)
    # cb is a C builtin's callback: followed from run the first time, then read before
    assert t.steps == ["pkg.outer", "pkg.inner", "pkg.outer"]
    assert t.upcalls == 0
