"""Offline price-catalog importers, and the staleness rule every front end shares.

Live API sources register in :mod:`gpucost.pricing.sources.registry`; an *importer* instead reads a
price catalog someone else published (a folder of files) and turns it into snapshots. Both end
in the same dated snapshot files, so the planner never knows which produced its prices.
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from gpucost.errors import UnknownProviderError

if TYPE_CHECKING:  # the command line builds its parsers from this module: keep numpy out
    from gpucost.pricing.snapshot import Snapshot

DEFAULT_MAX_AGE_DAYS = 30.0  # prices older than this are flagged STALE (compare, prices show)


def is_stale(snapshot: Snapshot, max_age_days: float = DEFAULT_MAX_AGE_DAYS,
             now: dt.datetime | None = None) -> bool:
    """Whether ``snapshot``'s prices are older than ``max_age_days`` days at ``now`` (UTC)."""
    return snapshot.age_days(now) > max_age_days


ImportFn = Callable[..., "list[Snapshot]"]


@dataclass(frozen=True, slots=True)
class Importer:
    name: str  # the KIND argument of `gpucost prices import KIND DIR`
    description: str
    target: str  # "module:function"; imported only when used

    def load(self) -> ImportFn:
        module, _, function = self.target.partition(":")
        return cast(ImportFn, getattr(importlib.import_module(module), function))


IMPORTERS: Mapping[str, Importer] = {i.name: i for i in (
    Importer("skypilot-catalog",
             "SkyPilot price catalogs (skypilot-org/skypilot-catalog, catalogs/v8): "
             "<cloud>/vms.csv or <cloud>_vms_gpu.csv files",
             "gpucost.pricing.sources.skypilot_catalog:import_skypilot_catalog"),
)}


def run_importer(kind: str, directory: str | os.PathLike[str], **options: Any) -> list[Snapshot]:
    """Snapshots from the catalog in ``directory``; ``options`` go to the importer."""
    importer = IMPORTERS.get(kind)
    if importer is None:
        raise UnknownProviderError(kind, sorted(IMPORTERS))
    return importer.load()(directory, **options)
