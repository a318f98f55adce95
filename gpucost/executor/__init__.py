"""The executor: turn a plan into a run that is safe by default.

A hard timeout and a budget cap are always set, every resource is in the ledger before and after
each provider call, teardown runs on success, failure, Ctrl-C, SIGTERM and timeout, and
checkpoints leave the machine during the run. Engines are loaded lazily (SkyPilot and httpx only
when a plan needs them).

Which engine runs a plan: ``local`` and ``torchrun`` on this machine; ``vast`` through Vast's
REST API (single machines, found by the plan's marketplace search); every other cloud through
SkyPilot (``gpucost[skypilot]``), which the ledger records as provider ``skypilot``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

from gpucost.errors import UnknownProviderError
from gpucost.executor.base import Provider

# SkyPilot's names for the clouds it launches on, which are also gpucost's provider names.
SKYPILOT_CLOUDS = ("aws", "gcp", "azure", "lambda", "runpod", "vast", "oci", "paperspace",
                   "fluidstack", "cudo", "nebius", "do", "shadeform", "verda")
_SKYPILOT = ("gpucost.executor.skypilot", "SkyPilotProvider")

# provider name -> (module, class)
PROVIDERS: dict[str, tuple[str, str]] = {
    **{cloud: _SKYPILOT for cloud in SKYPILOT_CLOUDS},
    "skypilot": _SKYPILOT,
    "local": ("gpucost.executor.local", "LocalProvider"),
    "torchrun": ("gpucost.executor.torchrun", "TorchrunProvider"),
    "vast": ("gpucost.executor.vast", "VastProvider"),
}


def provider_config(name: str, region: str = "") -> dict[str, Any]:
    """Provider settings from the environment, as stored in the ledger for later cleanup.

    ``GPUCOST_VAST_URL`` points Vast at another endpoint (an emulator in tests); secrets are
    never stored.
    """
    if PROVIDERS.get(name) == _SKYPILOT and name != "skypilot":
        return {"cloud": name}
    if name == "vast" and (url := os.environ.get("GPUCOST_VAST_URL")):
        return {"base_url": url}
    return {}


def get_provider(name: str, config: Mapping[str, Any] | None = None) -> Provider:
    if name not in PROVIDERS:
        raise UnknownProviderError(name, tuple(PROVIDERS))
    module, cls = PROVIDERS[name]
    provider: Provider = getattr(importlib.import_module(module), cls)(**dict(config or {}))
    return provider
