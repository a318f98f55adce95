"""The provider registry: one module per provider, each declaring ``PROVIDER``.

Everything gpucost knows about a provider (its price source, storage and transfer rates, month
convention, node limit, SkyPilot cloud, marketplace search, cross-continent transfer price) is
in its module here; pricing, limits, the planner, preflight and the executor read this registry
and name no provider themselves. The registry is found by listing this package, so adding a
provider is one new module. It points downwards only: it imports nothing of gpucost's but the
error tree, and a provider's live price source (which pulls httpx or boto3) is named by a
dotted path that only the pricing registry imports.
"""

from __future__ import annotations

import importlib
import pkgutil

from gpucost.errors import UnknownProviderError
from gpucost.providers._provider import (
    HYPERSCALER_MONTH_HOURS,
    MARKETPLACE_MONTH_HOURS,
    Marketplace,
    Provider,
    Rates,
    SkyPilot,
)

__all__ = ["HYPERSCALER_MONTH_HOURS", "MARKETPLACE_MONTH_HOURS", "Marketplace", "Provider",
           "Rates", "SkyPilot", "all", "arm_instance_prefixes", "find", "get", "marketplaces",
           "node_limits", "skypilot_clouds"]

_REGISTRY: dict[str, Provider] = {}


def _discover() -> dict[str, Provider]:
    found: dict[str, Provider] = {}
    # Private modules hold shared types, subpackages the price sources; every other module here
    # is a provider.
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg or info.name.startswith("_"):
            continue
        declared = getattr(importlib.import_module(f"{__name__}.{info.name}"), "PROVIDER", None)
        if not isinstance(declared, Provider):
            raise TypeError(f"{__name__}.{info.name} declares no PROVIDER = Provider(...)")
        if declared.name in found:
            raise ValueError(f"provider {declared.name!r} is declared twice "
                             f"(again in {__name__}.{info.name})")
        found[declared.name] = declared
    return dict(sorted(found.items()))


def _registry() -> dict[str, Provider]:
    if not _REGISTRY:
        _REGISTRY.update(_discover())
    return _REGISTRY


def all() -> tuple[Provider, ...]:  # read as providers.all()
    """Every provider gpucost knows, by name."""
    return tuple(_registry().values())


def find(name: str) -> Provider | None:
    """The provider called ``name``, or None (offers may name providers gpucost knows nothing
    more about)."""
    return _registry().get(name)


def get(name: str) -> Provider:
    """The provider called ``name``; UnknownProviderError names the known ones."""
    found = find(name)
    if found is None:
        raise UnknownProviderError(name, tuple(_registry()))
    return found


def node_limits() -> dict[str, int]:
    """The providers that cap a group of nodes below gpucost's own limit, and their caps."""
    return {p.name: p.max_nodes for p in all() if p.max_nodes is not None}


def arm_instance_prefixes() -> dict[str, tuple[str, ...]]:
    """The providers whose instance type says it runs on an Arm host, and the prefixes."""
    return {p.name: p.arm_instance_prefixes for p in all() if p.arm_instance_prefixes}


def marketplaces() -> tuple[str, ...]:
    """The providers whose plans record a search for a machine, not the machine."""
    return tuple(p.name for p in all() if p.marketplace is not None)


def skypilot_clouds() -> tuple[str, ...]:
    """The providers SkyPilot launches on."""
    return tuple(p.name for p in all() if p.skypilot is not None)
