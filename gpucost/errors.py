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
    │   └── NoOffersError         filters left nothing to rank
    ├── PolicyViolation       a budget, deadline or policy threshold is exceeded  (exit 1)
    ├── StaleDataError        price data older than the allowed age               (exit 3)
    ├── ProviderError         a provider or price source failed (network, API)    (exit 3)
    │   ├── CapacityError         the provider has no capacity for the request
    │   └── CredentialsError      credentials are missing or rejected
    └── ExecutorError         a run could not be launched, watched or torn down   (exit 3)
"""

from __future__ import annotations

from collections.abc import Sequence


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


class NoOffersError(InputError):
    pass


class PolicyViolation(GpuCostError):
    exit_code = 1


class StaleDataError(GpuCostError):
    exit_code = 3


class ProviderError(GpuCostError):
    exit_code = 3


class CapacityError(ProviderError):
    pass


class CredentialsError(ProviderError):
    pass


class ExecutorError(GpuCostError):
    exit_code = 3


def _one_line(text: str) -> str:
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates
    return text.replace("\r", "\\r").replace("\n", "\\n")


def exit_code(err: BaseException) -> int:
    """The CLI exit code for an exception: 0 ok, 1 policy, 2 input, 3 stale/internal."""
    if isinstance(err, GpuCostError):
        return err.exit_code
    return 3
