"""The one JSON envelope of every machine-readable output gpucost prints.

Every ``--format json`` document is an object that starts with the same four keys, so a reader
can tell what it holds and which gpucost wrote it before reading further::

    {"schema": "gpucost-compare", "schema_version": 1, "gpucost_version": "0.1.0",
     "generated_at": "2026-12-01T16:40:00Z", ...the command's own keys...}

Numbers that are not finite (NaN, +-inf: "no break-even", "no data") become ``null``: the JSON
standard has no ``NaN`` or ``Infinity`` and strict parsers reject them. numpy scalars and arrays,
tuples, paths and datetimes become their plain JSON spelling.

``add_format_argument`` gives every command the same ``--format`` option, with ``--json`` as an
alias for ``--format json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, TextIO

from gpucost import __version__

SCHEMA_PREFIX = "gpucost-"
ENVELOPE_KEYS = ("schema", "schema_version", "gpucost_version", "generated_at")


def timestamp(moment: dt.datetime | None = None) -> str:
    """UTC, to the second, with a Z: the one spelling of ``generated_at``."""
    moment = moment or dt.datetime.now(dt.UTC)
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def envelope(
    kind: str,
    body: Mapping[str, Any],
    *,
    schema_version: int = 1,
    generated_at: dt.datetime | None = None,
) -> dict[str, Any]:
    """``body`` behind the four envelope keys (schema ``gpucost-<kind>``)."""
    clash = set(ENVELOPE_KEYS) & set(body)
    if clash:
        raise ValueError(f"the body of a {kind!r} document sets envelope keys {sorted(clash)}")
    return {
        "schema": SCHEMA_PREFIX + kind,
        "schema_version": schema_version,
        "gpucost_version": __version__,
        "generated_at": timestamp(generated_at),
        **body,
    }


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as None and numpy/tuple/path/datetime values as JSON."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, dt.datetime):
        return timestamp(value) if value.tzinfo is not None else value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, Sequence | set | frozenset):
        return [json_safe(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays, without importing numpy
    if callable(tolist):
        return json_safe(tolist())
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def dumps(document: Mapping[str, Any]) -> str:
    """The document as indented strict JSON (never ``NaN`` or ``Infinity``), one final newline."""
    return json.dumps(json_safe(document), indent=2, allow_nan=False) + "\n"


def print_document(
    kind: str,
    body: Mapping[str, Any],
    *,
    schema_version: int = 1,
    generated_at: dt.datetime | None = None,
    stream: TextIO | None = None,
) -> None:
    """Write ``envelope(kind, body)`` as JSON to ``stream`` (default stdout)."""
    doc = envelope(kind, body, schema_version=schema_version, generated_at=generated_at)
    (stream or sys.stdout).write(dumps(doc))


def add_format_argument(
    parser: argparse.ArgumentParser | Any,
    choices: Sequence[str] = ("table", "json"),
    *,
    default: str | None = None,
) -> None:
    """``--format {choices}`` (default the first) and ``--json``, an alias for ``--format json``."""
    default = default or choices[0]
    parser.add_argument(
        "--format",
        choices=tuple(choices),
        default=default,
        help=f"output format (default: {default}); json is the versioned gpucost envelope",
    )
    parser.add_argument(
        "--json", dest="format", action="store_const", const="json", help="same as --format json"
    )
