"""Where gpucost keeps things: embedded defaults inside the package, user state in GPUCOST_HOME."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_REPO_ROOT = _PACKAGE_DIR.parent


def _embedded(name: str) -> Path:
    # A wheel carries the data under gpucost/_embedded; a source checkout or editable
    # install reads it from the repository root, where it is maintained.
    packaged = _PACKAGE_DIR / "_embedded" / name
    return packaged if packaged.is_dir() else _REPO_ROOT / name


def embedded_snapshots_dir() -> Path:
    return _embedded("pricing_snapshots")


def embedded_profiles_dir() -> Path:
    return _embedded("profiles")


def home() -> Path:
    """User state (refreshed snapshots, ledger, runs): $GPUCOST_HOME, else ~/.gpucost."""
    configured = os.environ.get("GPUCOST_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".gpucost"


def user_snapshots_dir() -> Path:
    return home() / "snapshots"


def runs_dir() -> Path:
    return home() / "runs"


def ledger_path() -> Path:
    return home() / "ledger.sqlite"
