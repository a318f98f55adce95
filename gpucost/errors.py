"""The one exception tree of gpucost.

Every error a user can cause says what was wrong and how to fix it. The command line maps each
class to an exit code (see ``exit_code``), so front ends never inspect message text.

    GpuCostError
    ├── InputError            bad arguments or files given by the user            (exit 2)
    │   ├── UnknownGpuError       a GPU name that resolves to nothing
    │   ├── UnknownProviderError  a provider or source name that is not registered
    │   ├── ProfileError          a profile file that is missing fields or corrupt
    │   ├── SnapshotError         a price snapshot that is missing fields or corrupt
    │   ├── PlanFileError         a plan file that is missing fields or out of range
    │   ├── PolicyError           a preflight policy file that is missing fields or out of range
    │   ├── NoOffersError         filters left nothing to rank
    │   ├── MissingExtraError     an optional package a command needs is not installed
    │   ├── StateFolderError      the state folder (GPUCOST_HOME) cannot be written
    │   ├── MeasurementStoreError the measurement store is unreadable or malformed
    │   ├── LedgerError           the run ledger cannot be opened, read or written
    │   └── RunFileError          a run's status, progress or metrics file is damaged
    ├── PolicyViolation       a budget, deadline or policy threshold is exceeded  (exit 1)
    ├── ProviderError         a provider or price source failed (network, API)    (exit 3)
    │   ├── HttpStatusError       an HTTP error status that retrying does not fix
    │   ├── Cancelled             a request given up on Ctrl-C or a deadline
    │   ├── CapacityError         the provider has no capacity for the request
    │   └── CredentialsError      credentials are missing or rejected
    └── ExecutorError         a run could not be launched, watched or torn down   (exit 3)

Stale prices (exit 3) have no class: `compare` and `plan` only flag them, and `preflight`'s
price-age check reports them as a failed check with exit code 3 (a report, not an exception).

Outside the tree, three ValueErrors for data files gpucost ships (CatalogFileError,
FabricFileError, CalibrationFileError): a malformed one is a packaging bug, reported as an
internal error (exit 3).
Control-flow exceptions that never reach a user stay private in their modules (http's _Stop,
the profiler's BaseExceptions that unwind a training loop, the run lock's LockBusy).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


class GpuCostError(Exception):
    """Base class. ``str(err)`` is a complete, one-line message for a user."""

    exit_code = 3

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # One line whatever a damaged file put into the message (a key holding a newline).
        self.message = _one_line(message)
        self.hint = None if hint is None else _one_line(hint)
        super().__init__(self.message if hint is None else f"{self.message} ({self.hint})")


class InputError(GpuCostError):
    exit_code = 2


class UnknownGpuError(InputError):
    def __init__(self, name: str, suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        if self.suggestions:
            hint = "did you mean " + ", ".join(repr(s) for s in self.suggestions) + "?"
        else:
            hint = "run `gpucost gpus` to list known GPUs"
        super().__init__(f"unknown GPU {name!r}", hint=hint)


class UnknownProviderError(InputError):
    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        super().__init__(f"unknown provider or source {name!r}", hint="known: " + ", ".join(known))


class ProfileError(InputError):
    pass


class SnapshotError(InputError):
    pass


class PlanFileError(InputError):
    pass


class PolicyError(InputError):
    """A policy file that is missing, malformed or out of range (exit 2)."""


class NoOffersError(InputError):
    pass


class MissingExtraError(InputError):
    """An optional package a command needs is not installed (exit 2); gpucost._optional
    writes the message, naming ``extra``, the pip extra that installs ``module``."""

    def __init__(self, module: str, *, extra: str, message: str, hint: str) -> None:
        self.module = module
        self.extra = extra
        super().__init__(message, hint=hint)


class StateFolderError(InputError):
    """The state folder (or a file in it) cannot be written: one line naming it and the fix."""

    def __init__(self, where: Path, problem: str, fix: str | None = None) -> None:
        if fix is None and os.environ.get("GPUCOST_HOME"):
            fix = "point GPUCOST_HOME at a folder you can write to"
        elif fix is None:
            fix = "make it writable, or set GPUCOST_HOME to a folder you can write to"
        super().__init__(f"gpucost's state folder cannot be used: {where} {problem}", hint=fix)


class MeasurementStoreError(InputError):
    """The measurement store is unreadable or malformed."""


class LedgerError(InputError):
    """The ledger file cannot be opened, read or written (exit 2). Without ``message``: it is
    damaged, and the hint is to move it aside."""

    def __init__(self, path: Path, problem: object, *, message: str | None = None,
                 hint: str | None = None) -> None:
        if message is None:
            message = f"the ledger {path} is unreadable ({problem})"
            hint = (f"move it aside with `mv {path} {path}.broken` and run again; what it "
                    "recorded is then unknown to gpucost: check your providers' consoles for "
                    "machines it started")
        super().__init__(message, hint=hint)


class RunFileError(InputError):
    """A run file (status.json, progress.json, metrics.jsonl) that is damaged (exit 2)."""


class PolicyViolation(GpuCostError):
    exit_code = 1


class ProviderError(GpuCostError):
    exit_code = 3


class HttpStatusError(ProviderError):
    """The API answered with an HTTP error status that retrying does not fix (404, 400, ...)."""

    def __init__(self, message: str, *, status_code: int, hint: str | None = None) -> None:
        self.status_code = status_code
        super().__init__(message, hint=hint)


class Cancelled(ProviderError):
    """The request was given up because its ``cancel`` event was set (Ctrl-C, a deadline)."""


class CapacityError(ProviderError):
    pass


class CredentialsError(ProviderError):
    pass


class ExecutorError(GpuCostError):
    exit_code = 3


class CatalogFileError(ValueError):
    """The shipped GPU catalog CSV is malformed: a packaging bug, not a user error."""


class FabricFileError(ValueError):
    """The shipped fabrics.csv is malformed: a packaging bug, not a user error."""


class CalibrationFileError(ValueError):
    """The shipped calibration.json, or a calibration handed to the model, is malformed: a
    packaging (or refit) bug, not a user error."""


def _one_line(text: str) -> str:
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates
    return text.replace("\r", "\\r").replace("\n", "\\n")


def exit_code(err: BaseException) -> int:
    """The CLI exit code for an exception: 0 ok, 1 policy, 2 input, 3 stale/internal."""
    if isinstance(err, GpuCostError):
        return err.exit_code
    return 3
