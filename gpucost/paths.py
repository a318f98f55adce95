"""Where gpucost keeps things: embedded defaults inside the package, user state in GPUCOST_HOME."""

from __future__ import annotations

import os
from pathlib import Path

from gpucost.errors import StateFolderError as StateFolderError  # re-exported: its old home

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


def writable_dir(folder: Path) -> Path:
    """``folder`` (created if missing), checked to be a folder this process can write in.

    Only commands that record state call this: those that only read (compare, predict, scale,
    explain, breakeven) work without a usable state folder.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        blocker = nearest_existing(folder)
        if not blocker.is_dir():
            raise StateFolderError(blocker, "is not a folder") from None
        raise StateFolderError(blocker, f"does not let gpucost create {folder} "
                                        f"({err.strerror or err})") from None
    if not folder.is_dir():
        raise StateFolderError(folder, "is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StateFolderError(folder, "is not writable")
    return folder


def state_file(path: Path) -> Path:
    """``path`` in a writable folder, and if it exists a regular file that opens for writing."""
    writable_dir(path.parent)
    if path.exists() or path.is_symlink():
        fix = "move it aside and gpucost starts a new one, or set GPUCOST_HOME elsewhere"
        if not path.is_file():
            raise StateFolderError(path, "is not a regular file", fix)
        # Asked, not opened: closing a descriptor of the file would drop every POSIX lock this
        # process holds on it, the ledger connection's own among them (SQLite's locks).
        if not os.access(path, os.R_OK | os.W_OK):
            raise StateFolderError(path, "cannot be opened for reading and writing", fix)
    return path


def nearest_existing(path: Path) -> Path:
    """The deepest of ``path`` and its parents that exists (as anything: file, folder, device)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return path
