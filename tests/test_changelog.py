"""CHANGELOG.md lists every public name: in a release's notes or in ``[Unreleased]``; the
current version has a dated section of its own."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import agcore_tools

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = [
    "agcore_tools",
    "agcore_tools.cycle",
    "agcore_tools.mcp",
    "agcore_tools.redis",
    "agcore_tools.temporal",
    "agcore_tools.testing",
]


def _release_notes(version: str) -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    match = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n(.*?)(?=^## \[|\Z)", text, re.M | re.S)
    assert match, f"CHANGELOG.md has no section for {version}"
    return match.group(1)


def _released_versions() -> list[str]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return re.findall(r"^## \[(\d[^\]]*)\]", text, re.M)


def test_the_current_version_has_its_dated_release_notes() -> None:
    versions = _released_versions()
    assert versions and versions[0] == agcore_tools.__version__, versions[:3]
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## \[{re.escape(versions[0])}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_name_is_in_the_current_release_notes(module: str) -> None:
    # Names added since the release are listed under [Unreleased] until the next one;
    # a name released earlier is in the notes of the release that added it.
    notes = _release_notes("Unreleased") + "".join(
        _release_notes(version) for version in _released_versions()
    )
    names = importlib.import_module(module).__all__
    # `name`, `@name`, `module.name`, or a call such as `name()` or `name(...)`.
    missing = [name for name in names if not re.search(rf"`(@|[\w.]+\.)?{name}\b", notes)]
    assert not missing, f"CHANGELOG.md {agcore_tools.__version__} does not mention {missing}"
