"""docs/architecture.md names every module of the package with its one job (#24): the map is
written from the modules' docstrings, so it cannot drift from them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import module_map  # noqa: E402


def test_the_module_map_is_current() -> None:
    text = module_map.DOC.read_text(encoding="utf-8")
    assert module_map.with_map(text) == text, (
        "docs/architecture.md's module map is out of date: run python scripts/module_map.py")


def test_every_module_says_its_job() -> None:
    undocumented = [line for line in module_map.module_map().splitlines()
                    if module_map.MISSING in line]
    assert not undocumented, undocumented


def test_the_map_lists_a_new_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "gpucost"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "thing.py").write_text('"""Does one thing. And more."""\n')
    (package / "bare.py").write_text("x = 1\n")
    monkeypatch.setattr(module_map, "PACKAGE", package)
    monkeypatch.setattr(module_map, "REPO", tmp_path)
    table = module_map.module_map()
    assert "| `gpucost.sub.thing` | Does one thing. |" in table
    assert f"| `gpucost.bare` | {module_map.MISSING} |" in table
