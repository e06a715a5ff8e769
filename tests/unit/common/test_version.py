"""One version, said in one place: pyproject reads `pdd_plan.__version__`, and CHANGELOG.md's
newest release (keep-a-changelog form) is that version."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pdd_plan

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[3]


def test_pyproject_takes_the_version_from_the_package():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in text
    assert 'version = {attr = "pdd_plan.__version__"}' in text
    assert not re.search(r'^version\s*=\s*"', text, re.M), "a second, literal version"


def test_changelog_newest_release_is_the_package_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in text and "keepachangelog.com" in text
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d\d-\d\d)$", text, re.M)
    assert releases, "no release heading: ## [X.Y.Z] - YYYY-MM-DD"
    assert releases[0][0] == pdd_plan.__version__
    # newest first, each release newer than the one below it
    dates = [d for _, d in releases]
    assert dates == sorted(dates, reverse=True)
    versions = [tuple(map(int, v.split("."))) for v, _ in releases]
    assert versions == sorted(versions, reverse=True)
