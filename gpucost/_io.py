"""Atomic file writes: readers see the old file or the new one, never half of either.

Files get the permissions the user's umask gives a new file (``0o666 & ~umask``, usually 0644),
as ``open()`` would: the temporary file behind the rename is created 0600 by ``mkstemp``, which
would otherwise leave every plan, profile and snapshot readable by its owner only.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _current_umask() -> int:
    # The umask can only be read by setting it; set it straight back (this process is
    # single-threaded wherever it writes files).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_current_umask())
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(
    path: str | os.PathLike[str], payload: Any, *, indent: int | None = 2
) -> Path:
    text = json.dumps(payload, indent=indent, sort_keys=False, allow_nan=False)
    return atomic_write_text(path, text + "\n")
