"""SkyPilot's hosted price catalogs over HTTP, parsed by the catalog importer.

The catalogs live at ``<base>/catalogs/v8/<cloud>/vms.csv`` in skypilot-org/skypilot-catalog
(served raw by GitHub). This source downloads one file per cloud into a temporary folder laid
out like the repository and hands it to :func:`gpucost.pricing.sources.skypilot_catalog.
import_skypilot_catalog`, so both paths share one parser. The clouds' offers are merged into one
snapshot (each row keeps its provider); per-cloud import accounting goes into the provenance.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from gpucost import providers
from gpucost._io import atomic_write_text
from gpucost.errors import GpuCostError, HttpStatusError, ProviderError
from gpucost.http import RetryingHttp
from gpucost.limits import MAX_CATALOG_BYTES
from gpucost.pricing.snapshot import Offers, Snapshot
from gpucost.pricing.sources.base import HttpPriceSource, now_utc
from gpucost.pricing.sources.skypilot_catalog import import_skypilot_catalog

CATALOG_PATH = "/skypilot-org/skypilot-catalog/master/catalogs/v8"


class SkyPilotHttpSource(HttpPriceSource):
    name = "skypilot-hosted"
    provider = "skypilot"  # rows keep each cloud's own provider name
    month_hours = 730.0
    credentials_hint = ""
    default_base_url = "https://raw.githubusercontent.com"
    timeout_s = 120.0  # the AWS catalog is tens of MB
    deadline_s = 600.0  # ... which a slow link takes minutes to bring
    max_answer_bytes = MAX_CATALOG_BYTES  # a catalog file, not an API page: the importer's cap

    def find_credentials(self, env: Mapping[str, str], home: Path) -> str | None:
        return ""  # public files

    def fetch(self, client: RetryingHttp, *, now: dt.datetime | None = None,
              clouds: tuple[str, ...] | None = None) -> Snapshot:
        """The hosted catalogs of ``clouds``, by default every cloud whose GPU offers the planner
        can use (its provider declares ``hosted_catalog``)."""
        clouds = hosted_catalog_clouds() if clouds is None else clouds
        fetched_at = now_utc(now)
        urls = {cloud: f"{CATALOG_PATH}/{cloud}/vms.csv" for cloud in clouds}
        missing = []
        with tempfile.TemporaryDirectory(prefix="gpucost-skypilot-") as tmp:
            for cloud, path in urls.items():
                try:
                    text = client.get_text(path)
                except HttpStatusError as exc:
                    if exc.status_code != 404:
                        raise
                    missing.append(cloud)  # the catalog no longer carries this cloud
                    continue
                atomic_write_text(Path(tmp) / cloud / "vms.csv", text)
            if len(missing) == len(urls):
                raise ProviderError(f"{self.name}: no catalog found for {', '.join(clouds)}",
                                    hint=f"is {self.url_env_var} or the catalog path right?")
            try:
                parts = import_skypilot_catalog(
                    tmp, fetched_at=fetched_at,
                    provenance={"repository": "skypilot-org/skypilot-catalog (hosted, master)"})
            except GpuCostError as exc:
                raise ProviderError(f"{self.name}: a downloaded catalog did not parse: "
                                    f"{exc.message}", hint="the catalog layout changed, or the "
                                    "download was cut off; retry") from None
        per_cloud: dict[str, Any] = {}
        for part in parts:
            cloud = part.source.removeprefix("skypilot-")
            per_cloud[cloud] = {**dict(part.provenance), "url": urls.get(cloud, "")}
        offers = Offers.concat([p.offers for p in parts])
        # One snapshot, one source name: the rows' cloud stays in their provider column.
        offers = replace(offers, source=np.full(len(offers), self.name))
        return Snapshot(source=self.name, fetched_at=fetched_at, offers=offers,
                        month_hours=self.month_hours, provenance={
                            "api": self.default_base_url + CATALOG_PATH, "offers": len(offers),
                            "parser": "gpucost.pricing.sources.skypilot_catalog",
                            "clouds": per_cloud, "clouds_missing": missing})


def hosted_catalog_clouds() -> tuple[str, ...]:
    """Clouds whose GPU offers the planner can use (others in the catalog rent no GPUs or need
    accounts gpucost does not model)."""
    return tuple(p.skypilot.cloud for p in providers.all()
                 if p.skypilot is not None and p.skypilot.hosted_catalog)


SOURCE = SkyPilotHttpSource()
