"""Files: atomic writes (readers see the old file or the new one, never half of either), and
the guarded reads every reader of a user's file starts with (size, encoding, syntax, nesting).

Files get the permissions the user's umask gives a new file (``0o666 & ~umask``, usually 0644),
as ``open()`` would: the temporary file behind the rename is created 0600 by ``mkstemp``, which
would otherwise leave every plan, profile and snapshot readable by its owner only.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from gpucost.limits import MAX_NESTING

if TYPE_CHECKING:
    from gpucost.errors import InputError


def _current_umask() -> int:
    # The umask can only be read by setting it; set it straight back (this process is
    # single-threaded wherever it writes files).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary handle whose contents replace ``path`` in one rename when the block ends (and
    never, if it raises): for writers that stream, such as a checkpoint copy."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_current_umask())
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    with atomic_open(path) as handle:
        handle.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(
    path: str | os.PathLike[str], payload: Any, *, indent: int | None = 2
) -> Path:
    text = json.dumps(payload, indent=indent, sort_keys=False, allow_nan=False)
    return atomic_write_text(path, text + "\n")


def read_text(path: str | os.PathLike[str], *, what: str, error: type[InputError],
              max_bytes: int, missing_hint: str | None = None) -> str:
    """A user's file as text: UTF-8, at most ``max_bytes``, else one-line ``error``."""
    p = Path(path)
    try:
        with p.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise error(f"{what} {p} does not exist", hint=missing_hint) from None
    except OSError as err:
        raise error(f"cannot read {what} {p}: {err.strerror or err}") from None
    if len(data) > max_bytes:
        raise error(f"{what} {p} is larger than {max_bytes // 1024} KiB",
                    hint="it is not a gpucost file, or it is damaged")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{what} {p} is not UTF-8 text (byte {data[err.start]:#04x} at offset "
                    f"{err.start})", hint="it is damaged or not a gpucost file") from None


def parse_json(text: str, *, origin: str, error: type[InputError]) -> Any:
    """JSON with finite numbers only, nested at most MAX_NESTING deep, else one-line ``error``.

    NaN, Infinity and numbers past the float range (1e999) are refused here, so that no
    free-form part of a document (a metrics table, an environment) carries one further.
    """
    try:
        value = json.loads(text, parse_constant=_refuse_number, parse_float=_finite_float)
    except json.JSONDecodeError as err:
        raise error(f"{origin} is not valid JSON (line {err.lineno}: {err.msg})",
                    hint="the file may be truncated; re-create it") from None
    except ValueError as err:  # from _refuse_number / _finite_float
        raise error(f"{origin}: {err}", hint="numbers must be finite") from None
    except RecursionError:
        raise _too_deep(origin, error) from None
    return _check_depth(value, origin, error)


def parse_toml(text: str, *, origin: str, error: type[InputError]) -> dict[str, Any]:
    """TOML nested at most MAX_NESTING deep, else one-line ``error``."""
    try:
        value: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise error(f"{origin} is not valid TOML: {err}",
                    hint="fix the syntax, or regenerate the file") from None
    except RecursionError:
        raise _too_deep(origin, error) from None
    _check_depth(value, origin, error)
    return value


def _refuse_number(text: str) -> Any:
    raise ValueError(f"{text[:40]} is not a finite number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        _refuse_number(text)
    return value


def _too_deep(origin: str, error: type[InputError]) -> InputError:
    return error(f"{origin} is nested deeper than {MAX_NESTING} levels",
                 hint="it is damaged or not a gpucost file")


def _check_depth(value: Any, origin: str, error: type[InputError]) -> Any:
    """Refuse documents nested deeper than MAX_NESTING (iteratively: no recursion to exhaust),
    and text that is not Unicode (JSON's "\\ud800" escapes a lone surrogate, which no output
    can print)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            raise _too_deep(origin, error)
        if isinstance(item, dict):
            stack.extend((k, depth) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as err:
                raise error(f"{origin} holds text that is not Unicode ({item[err.start]!a})",
                            hint="it is damaged or not a gpucost file") from None
    return value
