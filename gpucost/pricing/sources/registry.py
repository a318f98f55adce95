"""The registry of live price sources: each provider's declared source, and SkyPilot's hosted
catalog.

It imports the interface (:mod:`gpucost.pricing.sources.base`) and the sources, and base imports
none of them, so every import here sits at the module's top. A provider's source is named by the
dotted path its declaration gives (:mod:`gpucost.providers`) and imported on the registry's
first use, so boto3 stays unloaded until prices are refreshed; nothing else dispatches on source
names.
"""

from __future__ import annotations

import importlib
from typing import Any

from gpucost import providers
from gpucost.errors import UnknownProviderError
from gpucost.pricing.sources import skypilot_http
from gpucost.pricing.sources.base import PriceSource


def _registry() -> dict[str, PriceSource[Any]]:
    found: list[PriceSource[Any]] = []
    for provider in providers.all():
        if provider.price_source:
            module, _, attribute = provider.price_source.partition(":")
            found.append(getattr(importlib.import_module(module), attribute))
    found.append(skypilot_http.SOURCE)
    return {s.name: s for s in found}


_SOURCES: dict[str, PriceSource[Any]] = {}


def sources() -> dict[str, PriceSource[Any]]:
    """The registry of live sources, by name (imported on first use: boto3 stays unloaded)."""
    if not _SOURCES:
        _SOURCES.update(_registry())
    return _SOURCES


def get_source(name: str) -> PriceSource[Any]:
    registry = sources()
    try:
        return registry[name]
    except KeyError:
        raise UnknownProviderError(name, sorted(registry)) from None


def __getattr__(name: str) -> Any:
    # ``SOURCES`` reads as a module constant but is built on first access.
    if name == "SOURCES":
        return sources()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
