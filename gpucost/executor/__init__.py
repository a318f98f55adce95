"""The executor: turn a plan into a run that is safe by default.

A hard timeout and a budget cap are always set, every resource is in the ledger before and after
each provider call, teardown runs on success, failure, Ctrl-C, SIGTERM and timeout, and
checkpoints leave the machine during the run. Providers are loaded lazily (boto3 and httpx only
when a plan needs them).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

from gpucost.errors import UnknownProviderError
from gpucost.executor.base import Provider

# provider name -> (module, class)
PROVIDERS: dict[str, tuple[str, str]] = {
    "local": ("gpucost.executor.local", "LocalProvider"),
    "torchrun": ("gpucost.executor.torchrun", "TorchrunProvider"),
    "aws": ("gpucost.executor.aws", "AwsProvider"),
    "vast": ("gpucost.executor.vast", "VastProvider"),
}


def provider_config(name: str, region: str = "") -> dict[str, Any]:
    """Provider settings from the environment, as stored in the ledger for later cleanup.

    ``GPUCOST_AWS_ENDPOINT_URL`` and ``GPUCOST_VAST_URL`` point a provider at another endpoint
    (an emulator in tests); secrets are never stored.
    """
    if name == "aws":
        config: dict[str, Any] = {"region": region or os.environ.get("AWS_DEFAULT_REGION", "")}
        if url := os.environ.get("GPUCOST_AWS_ENDPOINT_URL"):
            config["endpoint_url"] = url
        if ami := os.environ.get("GPUCOST_AWS_AMI"):
            config["image_id"] = ami
        return config
    if name == "vast" and (url := os.environ.get("GPUCOST_VAST_URL")):
        return {"base_url": url}
    return {}


def get_provider(name: str, config: Mapping[str, Any] | None = None) -> Provider:
    if name not in PROVIDERS:
        raise UnknownProviderError(name, tuple(PROVIDERS))
    module, cls = PROVIDERS[name]
    provider: Provider = getattr(importlib.import_module(module), cls)(**dict(config or {}))
    return provider
