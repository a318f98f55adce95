"""Vast.ai marketplace offers (REST ``POST /api/v0/bundles/``), one snapshot row per offer.

Units, as the Vast API states them:

* ``dph_base`` $/h for the machine (GPUs, CPU, RAM); ``dph_total`` adds the disk for the
  requested ``allocated_storage``. gpucost keeps ``dph_base`` as ``price_hr`` and the disk
  separately as ``storage_gb_month`` = ``storage_cost`` ($/GB-month, a 720-hour month), so
  a plan prices its own disk size and a stopped machine's disk.
* ``inet_up_cost`` / ``inet_down_cost`` $/GB out / in (Vast bills both directions).
* ``inet_down`` Mbit/s -> ``network_gbps`` Gbit/s; ``gpu_ram`` / ``cpu_ram`` MiB -> GB (GiB, the
  way GPU memory is sold: 24564 MiB is a 24 GB RTX 4090).
* ``min_bid`` $/h for the whole machine is the least an interruptible ("bid") rental pays:
  ``spot_price_hr``.
* ``reliability2`` (else ``reliability``) 0..1 is kept; unverified hosts are dropped unless
  ``verified_only`` is off.

The search is rate limited to about 10 per minute per IP, hence one search per refresh and
6 s between requests.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from typing import Any

from gpucost.http import RetryingHttp
from gpucost.pricing.snapshot import Snapshot
from gpucost.pricing.sources.base import (
    HttpPriceSource,
    counted_snapshot,
    expect,
    gpu_link,
    now_utc,
    optional_price,
    parsing,
    price,
    resolve_gpu,
)
from gpucost.providers.vast import PROVIDER

SEARCH_PATH = "/api/v0/bundles/"
MIB_PER_GB = 1024.0  # Vast's "MB" are MiB; a GB of GPU memory as sold is a GiB
MBPS_PER_GBPS = 1000.0


class VastSource(HttpPriceSource, declared=PROVIDER):
    credentials_hint = ("set VAST_API_KEY, or run `vastai set api-key KEY` (writes "
                        "~/.config/vastai/vast_api_key); keys: cloud.vast.ai/manage-keys")
    api_key_env = "VAST_API_KEY"
    api_key_files = (".config/vastai/vast_api_key", ".vast_api_key")  # what vastai writes
    default_base_url = "https://console.vast.ai"
    min_interval_s = 6.0  # ~10 searches per minute
    limit = 1000
    verified_only = True

    def query(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "external": {"eq": False}, "rentable": {"eq": True}, "rented": {"eq": False},
            "num_gpus": {"gte": 1}, "order": [["dph_total", "asc"]], "type": "on-demand",
            "limit": self.limit, "allocated_storage": 5.0,
        }
        if self.verified_only:
            body["verified"] = {"eq": True}
        return body

    def fetch(self, client: RetryingHttp, *, now: dt.datetime | None = None) -> Snapshot:
        fetched_at = now_utc(now)
        answer = client.post_json(SEARCH_PATH, self.query())
        with parsing(self.name, "bundles answer"):
            expect(answer, dict, "the answer")
            offers = expect(answer["offers"], list, "offers")
        rows, dropped = self.parse_offers(offers)
        return counted_snapshot(
            self, rows, dropped, fetched_at=fetched_at, endpoint=SEARCH_PATH,
            read=("offers", len(offers)), query=self.query(),
            units="price_hr=dph_base; storage_cost $/GB-month on 720 h; inet_*_cost $/GB")

    def parse_offers(self, offers: list[Any]) -> tuple[list[dict[str, Any]], Counter[str]]:
        rows = []
        dropped: Counter[str] = Counter()
        for index, offer in enumerate(offers):
            with parsing(self.name, f"offer {index}"):
                expect(offer, dict, "offer")
                if self.verified_only and offer.get("verification", "verified") != "verified":
                    dropped["unverified host"] += 1
                    continue
                count = float(expect(offer["num_gpus"], (int, float), "num_gpus"))
                gpu_ram_mib = float(expect(offer["gpu_ram"], (int, float), "gpu_ram"))
                memory_gb = round(gpu_ram_mib / MIB_PER_GB, 2)
                gpu = resolve_gpu(str(offer["gpu_name"]), memory_gb=memory_gb)
                if gpu is None or count <= 0:
                    dropped["GPU not in catalog"] += 1
                    continue
                reliability = offer.get("reliability2", offer.get("reliability"))
                down_mbps = offer.get("inet_down")
                nvlink = float(offer.get("bw_nvlink") or 0.0) > 0
                rows.append({
                    "provider": self.provider,
                    "region": _region(offer.get("geolocation")),
                    "zone": str(offer.get("machine_id", "")),
                    "instance_type": str(expect(offer["id"], int, "id")),
                    "gpu": gpu, "gpu_count": count, "gpu_memory_gb": memory_gb,
                    "vcpus": float(offer.get("cpu_cores_effective") or math.nan),
                    "ram_gb": float(offer["cpu_ram"]) / MIB_PER_GB if offer.get("cpu_ram")
                    else math.nan,
                    "price_hr": price(offer["dph_base"], "dph_base"),
                    "spot_price_hr": optional_price(offer.get("min_bid"), "min_bid"),
                    "storage_gb_month": price(offer["storage_cost"], "storage_cost"),
                    "egress_gb": price(offer.get("inet_up_cost", 0), "inet_up_cost"),
                    "ingress_gb": price(offer.get("inet_down_cost", 0), "inet_down_cost"),
                    "month_hours": self.month_hours,
                    "network_gbps": (float(down_mbps) / MBPS_PER_GBPS
                                     if isinstance(down_mbps, int | float) else math.nan),
                    "intra_node_link": "nvlink" if nvlink else gpu_link(gpu),
                    "reliability": (float(reliability) if isinstance(reliability, int | float)
                                    else math.nan),
                })
        return rows, dropped


def _region(geolocation: object) -> str:
    """"Texas, US" -> "US-Texas"; ", CN" -> "CN"; missing -> "unknown"."""
    if not isinstance(geolocation, str) or not geolocation.strip(" ,"):
        return "unknown"
    place, _, country = geolocation.rpartition(",")
    country, place = country.strip(), place.strip()
    return f"{country}-{place}" if country and place else (country or place)


SOURCE = VastSource()
