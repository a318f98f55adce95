"""Text from files, jobs and servers made safe to print or to write into a one-line comment.

A metric name, a status.json field, a profile name or a region comes from something gpucost does
not control; printed raw, an escape sequence in it moves the cursor, retitles the terminal or
hides the lines above it, and a newline in a value written into a YAML comment starts a new key.
:func:`printable` writes each control character (C0, DEL, C1) and each Unicode line or paragraph
separator as a visible escape, so what is shown is what the file holds.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (0x85 is a YAML line break), and U+2028/U+2029 (line breaks to
# YAML and to some terminals).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, keep: str = "\n\t") -> str:
    """``text`` (``str()`` of it) with every control character except those in ``keep`` written
    as ``\\xNN`` (``\\uNNNN`` for the Unicode separators). ``keep=""``: one line, for a
    comment or a table cell."""
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _escape(m), str(text))


def rich_text(text: object) -> str:
    """:func:`printable` on one line, with rich markup escaped: for a value (a profile name, a
    region) printed through rich, where ``[red]`` in it would be read as a style."""
    from rich.markup import escape

    return escape(printable(text, keep=""))
