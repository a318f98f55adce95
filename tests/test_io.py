"""The shared atomic writer: whole files only, with the permissions the user's umask gives."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpucost._io import atomic_write_json, atomic_write_text


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_file_follows_the_umask(tmp_path: Path, umask: None, mask: int, mode: int) -> None:
    os.umask(mask)
    target = atomic_write_text(tmp_path / "plan.toml", "x = 1\n")
    assert stat.S_IMODE(target.stat().st_mode) == mode
    assert os.umask(mask) == mask  # the writer put the umask back


def test_rewrite_replaces_whole_file_and_leaves_no_temporary(tmp_path: Path, umask: None) -> None:
    target = tmp_path / "status.json"
    atomic_write_json(target, {"epoch": 1, "note": "a much longer first version"})
    atomic_write_json(target, {"epoch": 2})
    assert target.read_text() == '{\n  "epoch": 2\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["status.json"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_nan_is_refused_not_written_as_bare_token(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        atomic_write_json(tmp_path / "x.json", {"v": float("nan")})
    assert not (tmp_path / "x.json").exists()


def test_a_streamed_write_that_fails_leaves_the_old_file(tmp_path: Path, umask: None) -> None:
    from gpucost._io import atomic_open

    target = tmp_path / "ckpt.pt"
    atomic_write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_open(target) as out:
        out.write(b"half of the new")
        raise RuntimeError("killed mid-copy")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


def test_shipped_checkpoints_follow_the_umask(tmp_path: Path, umask: None) -> None:
    # Was: checkpoints copied through their own mkstemp were 0600 whatever the umask.
    from gpucost.executor.checkpoints import CheckpointStore

    os.umask(0o002)
    src = tmp_path / "c.pt"
    src.write_bytes(b"weights")
    store = CheckpointStore("local:ckpt", namespace="job", base_dir=tmp_path)
    shipped = Path(store.ship(src, 3))
    assert shipped.read_bytes() == b"weights"
    assert stat.S_IMODE(shipped.stat().st_mode) == 0o664
