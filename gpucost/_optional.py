"""Optional packages: the one adaptor for importing what an extra of gpucost installs.

A package that only an extra installs (torch, matplotlib, textual, boto3, pynvml, SkyPilot) is
missing on a plain ``pip install gpucost``. Where a command needs it, that is an install step the
user has not done, not a bug in gpucost: :func:`require` says so in one line, with the ``pip``
command that installs the extra, and exits 2 like any other input the user can fix. Where the
package is a bonus (NVML readings), :func:`optional` gives None instead.

Every import of such a package inside a function goes through here, so the "install
gpucost[EXTRA]" message is written once. (numpy and pandas are core dependencies: they are
imported lazily where `gpucost --help` or the planning path must not load them, not here.)
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from gpucost.errors import MissingExtraError

# Top-level module -> (the extra in pyproject.toml that installs it, the package's own name).
# The test of this module checks every extra named here against [project.optional-dependencies].
EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "PyTorch"),
    "matplotlib": ("plot", "matplotlib"),
    "textual": ("tui", "Textual"),
    "boto3": ("aws", "boto3"),
    "botocore": ("aws", "botocore"),
    "pynvml": ("local", "nvidia-ml-py"),
    "sky": ("skypilot", "SkyPilot"),
}


def missing_extra(module: str, *, needed_for: str, then: str = "") -> MissingExtraError:
    """The error for ``module`` missing: its extra from :data:`EXTRAS`, the ``pip`` command
    in the hint and ``then`` (a step after the install) after it."""
    extra, package = EXTRAS[module.partition(".")[0]]
    hint = install_hint(extra) + (f", then {then}" if then else "")
    return MissingExtraError(module, extra=extra, message=f"{needed_for} needs {package}: "
                             f"install gpucost[{extra}]", hint=hint)


def install_hint(extra: str) -> str:
    return f'pip install "gpucost[{extra}]"'


def _missing(err: ImportError, module: str) -> bool:
    """Whether the import failed because ``module``'s package (or a part of it) is absent,
    rather than because something the package imports failed, which stays a bug."""
    return err.name is not None and err.name.partition(".")[0] == module.partition(".")[0]


def require(module: str, *, needed_for: str, then: str = "") -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming its extra. ``needed_for``
    starts the message ("scale --plot" reads "scale --plot needs matplotlib: install
    gpucost[plot]"); ``then`` is a step after the install, added to the hint."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        if not _missing(err, module):
            raise
        raise missing_extra(module, needed_for=needed_for, then=then) from None


def require_installed(module: str, *, needed_for: str) -> None:
    """As :func:`require` without importing: for a package a child process imports (the
    on-arrival matmul, torchrun), where importing it here would only cost time."""
    if not installed(module):
        raise missing_extra(module, needed_for=needed_for)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    top = module.partition(".")[0]
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):  # a parent that fails, or a module without a spec
        return False


def optional(module: str) -> ModuleType | None:
    """``module`` when it imports, else None: for a package that only adds to what gpucost can
    say (NVML's readings), whose absence, or failure to import, is no error."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
