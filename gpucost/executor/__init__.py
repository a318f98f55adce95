"""The executor: turn a plan into a run that is safe by default.

A hard timeout and a budget cap are always set, every resource is in the ledger before and after
each provider call, teardown runs on success, failure, Ctrl-C, SIGTERM and timeout, and
checkpoints leave the machine during the run. Engines are loaded lazily (SkyPilot and httpx only
when a plan needs them).

Which engine runs a plan: ``local`` and ``torchrun`` on this machine; every cloud, the
marketplaces included, through SkyPilot (``gpucost[skypilot]``), which the ledger records
as provider ``skypilot``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from gpucost import providers
from gpucost.errors import UnknownProviderError
from gpucost.executor.base import Provider

# SkyPilot's names for the clouds it launches on, which are also gpucost's provider names.
SKYPILOT_CLOUDS = providers.skypilot_clouds()
_SKYPILOT = ("gpucost.executor.skypilot", "SkyPilotProvider")

# provider name -> (module, class)
PROVIDERS: dict[str, tuple[str, str]] = {
    **{cloud: _SKYPILOT for cloud in SKYPILOT_CLOUDS},
    "skypilot": _SKYPILOT,
    "local": ("gpucost.executor.local", "LocalProvider"),
    "torchrun": ("gpucost.executor.torchrun", "TorchrunProvider"),
}


def provider_config(name: str) -> dict[str, Any]:
    """Provider settings, as stored in the ledger for later cleanup (never a secret)."""
    if PROVIDERS.get(name) == _SKYPILOT and name != "skypilot":
        return {"cloud": name}
    return {}


def provider_class(name: str) -> type[Provider]:
    if name not in PROVIDERS:
        raise UnknownProviderError(name, tuple(PROVIDERS))
    module, cls = PROVIDERS[name]
    found: type[Provider] = getattr(importlib.import_module(module), cls)
    return found


def get_provider(name: str, config: Mapping[str, Any] | None = None) -> Provider:
    return provider_class(name)(**dict(config or {}))
