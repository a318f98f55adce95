"""Where a planning command may write: checked before any work, one line and exit 2 if not.

A file is written only into a folder that exists (a typo in a path should not create a tree
of folders), never onto a folder, with the suffix its format needs, and never over a file that
gpucost did not write for the same purpose unless --force says so.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from gpucost.errors import InputError
from gpucost.limits import MAX_PROFILE_BYTES
from gpucost.paths import nearest_existing
from gpucost.planfile import SCHEMA, SKYPILOT_TASK_MARK
from gpucost.profile import SCHEMA_ID as PROFILE_SCHEMA

# A plan file is small; a file much larger than this is not one, and is not read to find out.
_PLAN_SNIFF_BYTES = 1 << 20


def check_output_file(
    path: str, *, what: str, example: str, suffix: str | None = None
) -> Path:
    """``path`` as a file gpucost may create or replace (suffix: e.g. ".png", any case)."""
    target = Path(path)
    if target.is_dir():
        raise InputError(
            f"{what} {path} is a folder", hint=f"give a file name, e.g. {target / example}"
        )
    folder = target.parent
    if not folder.is_dir():
        raise InputError(
            f"{what} {path}: the folder {folder} does not exist",
            hint="create it first; gpucost does not create folders for its output",
        )
    if suffix is not None and target.suffix.lower() != suffix:
        raise InputError(
            f"{what} {path} must end in {suffix}", hint=f"e.g. {target.with_suffix(suffix)}"
        )
    return target


def is_plan_file(path: Path) -> bool:
    """Whether ``path`` holds a gpucost plan (its TOML declares the plan schema)."""
    try:
        if path.stat().st_size > _PLAN_SNIFF_BYTES:
            return False
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return doc.get("schema") == SCHEMA


def check_plan_output(path: str, *, force: bool) -> Path:
    """``path`` for a plan file: replacing an earlier plan is fine, anything else needs force."""
    target = check_output_file(path, what="plan file", example="plan.toml")
    if target.exists() and not force and not is_plan_file(target):
        raise InputError(
            f"{path} exists and is not a gpucost plan: not overwriting it",
            hint="choose another name, or pass --force to replace it",
        )
    return target


def is_profile_file(path: Path) -> bool:
    """Whether ``path`` holds a gpucost profile (its JSON declares the profile schema)."""
    try:
        if path.stat().st_size > MAX_PROFILE_BYTES:
            return False
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == PROFILE_SCHEMA


def check_profile_output(path: Path, *, force: bool, made_folder: bool = False) -> Path:
    """``path`` for a profile: replacing an earlier profile is fine, anything else needs force.
    ``made_folder``: the default profiles/ folder, which gpucost makes where it is missing; a
    path the user gave goes only into a folder that exists."""
    if made_folder and not path.parent.exists():
        return path
    target = check_output_file(str(path), what="profile file", example="profile.json")
    if target.exists() and not force and not is_profile_file(target):
        raise InputError(
            f"{path} exists and is not a gpucost profile: not overwriting it",
            hint="choose another --out, or pass --force to replace it",
        )
    return target


def check_export_output(path: str, *, force: bool) -> Path:
    """``path`` for a SkyPilot task: replacing an earlier export is fine, anything else needs
    force."""
    target = check_output_file(path, what="SkyPilot task", example="plan.sky.yaml")
    if target.exists() and not force and not _starts_with(target, SKYPILOT_TASK_MARK):
        raise InputError(
            f"{path} exists and is not a SkyPilot task gpucost wrote: not overwriting it",
            hint="choose another --export-out, or pass --force to replace it",
        )
    return target


def _starts_with(path: Path, mark: str) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(len(mark)) == mark.encode()
    except OSError:
        return False


def check_output_folder(path: str, *, flag: str) -> Path:
    """``path`` as a folder gpucost may write files into, made (when written to) where missing,
    as the default snapshot folder is; checked, not made, so a refused input leaves nothing."""
    target = Path(path)
    existing = nearest_existing(target)
    if not existing.is_dir():
        what = path if existing == target else f"{path}: {existing}"
        raise InputError(f"{flag} {what} is a file, not a folder",
                         hint="give a folder for the files, e.g. snapshots/")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {path}: {existing} is not writable",
                         hint="give a folder you can write to")
    return target
