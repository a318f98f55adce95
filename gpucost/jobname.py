"""The one rule for job names (and run ids): safe as a single folder name.

A job's name becomes a folder twice, under the checkpoint target and (slugged) in its run id
under $GPUCOST_HOME/runs, so a name must not climb out of either (``..``), nest folders
(``/``, ``\\``), or carry bytes that paths and terminals mangle (NUL, control characters).
Plan loading (hence launch and preflight alike) and the checkpoint store apply it.
"""

from __future__ import annotations

import re
import unicodedata

MAX_LENGTH = 100
# Characters a name must not hold: controls, format characters, line and paragraph separators.
_CONTROL_CATEGORIES = ("Cc", "Cf", "Zl", "Zp")


def job_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a job name, or None when it is fine."""
    if not name.strip():
        return "it is empty"
    if len(name) > MAX_LENGTH:
        return f"it is {len(name)} characters long, more than {MAX_LENGTH}"
    for bad, why in (("/", "a '/'"), ("\\", "a '\\'"), ("..", "'..'")):
        if bad in name:
            return f"it contains {why}, which would make it a path"
    for ch in name:
        if unicodedata.category(ch) in _CONTROL_CATEGORIES:
            return f"it contains the control character U+{ord(ch):04X}"
    return None


NAME_HINT = "use letters, digits, '-', '_' and '.', e.g. team-exp1 rather than team/exp1"


def name_from_label(label: str, fallback: str) -> str:
    """``label`` (a profile's name: "GNMT v2", "bert-large/squad") as a name this rule accepts,
    which is also one safe file or folder name: path separators become '-', runs of dots one
    dot, control characters go, and so do leading dots and dashes (no hidden file, no '..');
    cut to MAX_LENGTH. ``fallback`` where nothing is left."""
    text = "".join(ch for ch in label if unicodedata.category(ch) not in _CONTROL_CATEGORIES)
    text = re.sub(r"\.{2,}", ".", re.sub(r"[/\\]+", "-", text))
    text = text.lstrip(".-").strip()[:MAX_LENGTH].strip()
    return text or fallback
