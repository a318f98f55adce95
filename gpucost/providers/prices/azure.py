"""Azure Retail Prices API (public, no key): GPU virtual machines, pay-as-you-go and Spot.

The API prices meters, not machines: it says nothing about a size's GPUs, so ``SIZES`` maps
each GPU VM size to its GPUs, vCPUs and memory (from Microsoft's "GPU-accelerated VM sizes"
pages, learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/). Rules:

* only ``type == "Consumption"`` rows (DevTestConsumption and whole-term Reservation rows out);
* Windows rows (productName "... Windows") are dropped: gpucost trains on Linux;
* skuName "... Spot" is the Spot price of the size; "... Low Priority" is the retired Batch/
  low-priority market, counted and dropped (not rentable as a VM);
* ``unitOfMeasure`` must be "1 Hour"; prices are USD per hour for the whole VM;
* ``NextPageLink`` is followed until empty; it is requested relative to the configured base URL,
  so a replay server sees every page.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from gpucost.catalog import get_gpu
from gpucost.errors import ProviderError
from gpucost.http import RetryingHttp
from gpucost.pricing.rates import offer_rates
from gpucost.pricing.snapshot import Snapshot
from gpucost.pricing.sources.base import (
    HttpPriceSource,
    counted_snapshot,
    expect,
    gpu_link,
    now_utc,
    parsing,
    price,
    resolve_gpu,
)
from gpucost.providers.azure import PROVIDER

API_PATH = "/api/retail/prices"
API_VERSION = "2023-01-01-preview"
MAX_PAGES = 10_000  # a NextPageLink loop guard; the GPU query is a few pages

# arm SKU name -> (GPU as the catalog names it, GPUs per VM, vCPUs, RAM GB)
SIZES: dict[str, tuple[str, float, float, float]] = {
    "Standard_NC4as_T4_v3": ("T4", 1, 4, 28),
    "Standard_NC8as_T4_v3": ("T4", 1, 8, 56),
    "Standard_NC16as_T4_v3": ("T4", 1, 16, 110),
    "Standard_NC64as_T4_v3": ("T4", 4, 64, 440),
    "Standard_NC6s_v3": ("V100 PCIe 16GB", 1, 6, 112),
    "Standard_NC12s_v3": ("V100 PCIe 16GB", 2, 12, 224),
    "Standard_NC24s_v3": ("V100 PCIe 16GB", 4, 24, 448),
    "Standard_NC24rs_v3": ("V100 PCIe 16GB", 4, 24, 448),
    "Standard_ND40rs_v2": ("V100 SXM2 32GB", 8, 40, 672),
    "Standard_NC24ads_A100_v4": ("A100 PCIe 80GB", 1, 24, 220),
    "Standard_NC48ads_A100_v4": ("A100 PCIe 80GB", 2, 48, 440),
    "Standard_NC96ads_A100_v4": ("A100 PCIe 80GB", 4, 96, 880),
    "Standard_ND96asr_v4": ("A100 SXM4 40GB", 8, 96, 900),
    "Standard_ND96amsr_A100_v4": ("A100 SXM4 80GB", 8, 96, 1900),
    "Standard_NC40ads_H100_v5": ("H100 NVL 94GB", 1, 40, 320),
    "Standard_NC80adis_H100_v5": ("H100 NVL 94GB", 2, 80, 640),
    "Standard_ND96isr_H100_v5": ("H100 SXM5 80GB", 8, 96, 1900),
    "Standard_ND96isr_H200_v5": ("H200 SXM 141GB", 8, 96, 1850),
    "Standard_ND96isr_MI300X_v5": ("MI300X", 8, 96, 1850),
}


class AzureSource(HttpPriceSource, declared=PROVIDER):
    credentials_hint = ""
    api_key_env = ""  # the Retail Prices API is public
    default_base_url = "https://prices.azure.com"

    def query(self) -> dict[str, str]:
        sizes = " or ".join(f"armSkuName eq '{s}'" for s in SIZES)
        return {"api-version": API_VERSION,
                "$filter": f"serviceName eq 'Virtual Machines' and priceType eq 'Consumption' "
                           f"and ({sizes})"}

    def fetch(self, client: RetryingHttp, *, now: dt.datetime | None = None) -> Snapshot:
        fetched_at = now_utc(now)
        items: list[Any] = []
        page = client.get_json(API_PATH, params=self.query())
        pages = 1
        while True:
            with parsing(self.name, "Retail Prices page"):
                expect(page, dict, "the answer")
                items.extend(expect(page["Items"], list, "Items"))
                link = expect(page.get("NextPageLink") or "", str, "NextPageLink")
            if not link:
                break
            if pages >= MAX_PAGES:
                raise ProviderError(f"{self.name}: more than {MAX_PAGES} pages; does "
                                    "NextPageLink loop?")
            parts = urlsplit(link)
            if parts.path.rstrip("/") != API_PATH:
                raise ProviderError(f"{self.name}: NextPageLink {link[:80]!r} is not a Retail "
                                    "Prices URL", hint="the API changed; report it")
            # Same API, next page: keep the configured host (a proxy or a replay server).
            page = client.get_json(parts.path + ("?" + parts.query if parts.query else ""))
            pages += 1
        rows, dropped = self.parse_items(items)
        return counted_snapshot(
            self, rows, dropped, fetched_at=fetched_at, endpoint=API_PATH,
            read=("items", len(items)), api_version=API_VERSION, pages=pages,
            sizes_table="learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated")

    def parse_items(self, items: list[Any]) -> tuple[list[dict[str, Any]], Counter[str]]:
        """Offers from Retail Prices items, and the count of items dropped per reason."""
        dropped: Counter[str] = Counter()
        on_demand: dict[tuple[str, str], float] = {}
        spot: dict[tuple[str, str], float] = {}
        for index, item in enumerate(items):
            with parsing(self.name, f"Retail Prices item {index}"):
                expect(item, dict, "item")
                sku = str(item["armSkuName"])
                sku_name = str(item["skuName"])
                kind = item["type"]
                if kind != "Consumption":
                    dropped[f"type {kind}"] += 1
                    continue
                if "windows" in str(item["productName"]).lower():
                    dropped["Windows"] += 1
                    continue
                if sku_name.endswith("Low Priority"):
                    dropped["Low Priority"] += 1
                    continue
                if sku not in SIZES:
                    dropped["not a GPU size gpucost knows"] += 1
                    continue
                if item["unitOfMeasure"] != "1 Hour":
                    raise ValueError(f"unitOfMeasure {item['unitOfMeasure']!r} for {sku}, "
                                     f"expected '1 Hour'")
                if item.get("currencyCode", "USD") != "USD":
                    raise ValueError(f"currencyCode {item['currencyCode']!r}, expected USD")
                amount = price(item["retailPrice"], "retailPrice")
                key = (str(item["armRegionName"]), sku)
                target = spot if sku_name.endswith(" Spot") else on_demand
                # Several meters per size and region (per-region meters): keep the cheapest.
                target[key] = min(amount, target.get(key, math.inf))

        rows = []
        rates = offer_rates(self.provider)
        for (region, sku), hourly in sorted(on_demand.items()):
            gpu_name, count, vcpus, ram_gb = SIZES[sku]
            gpu = resolve_gpu(gpu_name)
            if gpu is None:
                dropped["GPU not in catalog"] += 1
                continue
            rows.append({
                "provider": self.provider, "region": region, "instance_type": sku, "gpu": gpu,
                "gpu_count": count, "gpu_memory_gb": get_gpu(gpu).memory_gb, "vcpus": vcpus,
                "ram_gb": ram_gb, "price_hr": hourly,
                "spot_price_hr": spot.get((region, sku), math.nan),
                **rates, "intra_node_link": gpu_link(gpu),
            })
        dropped["Spot without a pay-as-you-go price"] += len(set(spot) - set(on_demand))
        return rows, +dropped


SOURCE = AzureSource()
