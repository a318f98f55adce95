"""The one way every golden file is checked and regenerated.

A golden file under tests/golden/ holds an output exactly as it should be. After an intended
change, ``GPUCOST_UPDATE_GOLDENS=1 python -m pytest`` rewrites every golden file, every SVG
snapshot of the TUI (conftest.py turns the variable into syrupy's --snapshot-update) and the
embedded price snapshots (test_skypilot_import.py, from ../shared/data); review the diff
before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
UPDATE_ENV = "GPUCOST_UPDATE_GOLDENS"


def updating() -> bool:
    return os.environ.get(UPDATE_ENV) == "1"


def assert_golden(name: str, text: str) -> None:
    """``text`` equals tests/golden/<name>; with GPUCOST_UPDATE_GOLDENS=1 it is written there."""
    from gpucost._io import atomic_write_text

    golden = GOLDEN_DIR / name
    if updating():
        atomic_write_text(golden, text)
    assert golden.exists(), f"{golden} missing: run with {UPDATE_ENV}=1"
    assert text == golden.read_text(encoding="utf-8"), (
        f"output differs from {golden}; after an intended change rerun with {UPDATE_ENV}=1"
    )
