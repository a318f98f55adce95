"""RunPod GraphQL ``gpuTypes``: per-GPU prices multiplied out per pod size.

RunPod quotes every price per GPU per hour (``securePrice``, ``communityPrice``,
``secureSpotPrice``, ``communitySpotPrice``; null when that cloud does not offer the GPU). A pod
with N GPUs costs N times that, so each GPU type becomes one offer per cloud (secure, community)
and per size N in 1, 2, 4, 8 up to ``maxGpuCount`` (and within ``availableGpuCounts`` when the
API states it). The products are computed in Decimal.

GraphQL reports errors with HTTP 200 and an ``errors`` list: those become ProviderError with the
API's message.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gpucost.errors import CredentialsError, ProviderError
from gpucost.http import RetryingHttp
from gpucost.pricing.rates import offer_rates
from gpucost.pricing.snapshot import Snapshot
from gpucost.pricing.sources.base import (
    HttpPriceSource,
    counted_snapshot,
    expect,
    gpu_link,
    now_utc,
    optional_price,
    parsing,
    resolve_gpu,
)
from gpucost.providers.runpod import PROVIDER

GRAPHQL_PATH = "/graphql"
POD_SIZES = (1, 2, 4, 8)
QUERY = """query GpuTypes {
  gpuTypes {
    id displayName manufacturer memoryInGb maxGpuCount secureCloud communityCloud
    securePrice communityPrice secureSpotPrice communitySpotPrice
    lowestPrice(input: {gpuCount: 1}) { availableGpuCounts stockStatus }
  }
}"""
# cloud -> (flag field, on-demand field, spot field)
CLOUDS = {"secure": ("secureCloud", "securePrice", "secureSpotPrice"),
          "community": ("communityCloud", "communityPrice", "communitySpotPrice")}


def graphql_data(source: str, answer: Any) -> Mapping[str, Any]:
    """``data`` of a GraphQL answer; its ``errors`` (sent with HTTP 200) as ProviderError."""
    with parsing(source, "GraphQL answer"):
        expect(answer, dict, "the answer")
        errors = answer.get("errors")
        if errors:
            messages = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e)
                                 for e in expect(errors, list, "errors"))
            if "unauthorized" in messages.lower() or "api key" in messages.lower():
                raise CredentialsError(f"{source}: the API refused the key: {messages}",
                                       hint="check RUNPOD_API_KEY")
            raise ProviderError(f"{source}: GraphQL error: {messages}")
        data: Mapping[str, Any] = expect(answer["data"], dict, "data")
    return data


class RunPodSource(HttpPriceSource, declared=PROVIDER):
    credentials_hint = ("set RUNPOD_API_KEY (create one at runpod.io/console/user/settings, "
                        "API Keys, read access)")
    api_key_env = "RUNPOD_API_KEY"
    default_base_url = "https://api.runpod.io"

    def fetch(self, client: RetryingHttp, *, now: dt.datetime | None = None) -> Snapshot:
        fetched_at = now_utc(now)
        data = graphql_data(self.name, client.post_json(GRAPHQL_PATH, {"query": QUERY}))
        with parsing(self.name, "gpuTypes"):
            types = expect(data["gpuTypes"], list, "gpuTypes")
        rows, dropped = self.parse_types(types)
        return counted_snapshot(
            self, rows, dropped, fetched_at=fetched_at, endpoint=GRAPHQL_PATH,
            read=("gpu_types", len(types)),
            units="API prices are $/GPU/h; price_hr = per-GPU price x gpu_count",
            regions="secure-cloud / community-cloud (RunPod places pods itself)")

    def parse_types(self, types: list[Any]) -> tuple[list[dict[str, Any]], Counter[str]]:
        rows = []
        dropped: Counter[str] = Counter()
        rates = offer_rates(self.provider)
        for index, item in enumerate(types):
            with parsing(self.name, f"gpuTypes[{index}]"):
                expect(item, dict, "gpu type")
                type_id = str(item["id"])
                memory_gb = item.get("memoryInGb")
                memory = float(memory_gb) if isinstance(memory_gb, int | float) else None
                gpu = resolve_gpu(type_id, memory_gb=memory) or resolve_gpu(
                    str(item.get("displayName", "")), memory_gb=memory)
                if gpu is None:
                    dropped["GPU not in catalog"] += 1
                    continue
                max_count = int(item.get("maxGpuCount") or max(POD_SIZES))
                lowest = item.get("lowestPrice") or {}
                available = lowest.get("availableGpuCounts") if isinstance(lowest, dict) else None
                sizes = [n for n in POD_SIZES if n <= max_count
                         and (not available or n in available)]
                offered = False
                for cloud, (flag, on_demand_field, spot_field) in CLOUDS.items():
                    per_gpu = optional_price(item.get(on_demand_field), on_demand_field)
                    if item.get(flag) is False or math.isnan(per_gpu):
                        continue
                    spot_per_gpu = optional_price(item.get(spot_field), spot_field)
                    offered = True
                    for n in sizes:
                        rows.append({
                            "provider": self.provider, "region": f"{cloud}-cloud",
                            "instance_type": f"{n}x {type_id}", "gpu": gpu, "gpu_count": float(n),
                            "gpu_memory_gb": memory if memory is not None else math.nan,
                            "price_hr": _times(per_gpu, n),
                            "spot_price_hr": _times(spot_per_gpu, n),
                            **rates, "intra_node_link": gpu_link(gpu),
                        })
                if not offered:
                    dropped["no on-demand price"] += 1
        return rows, dropped


def _times(per_gpu_usd_hr: float, count: int) -> float:
    """Per-GPU $/h times the GPU count, exactly (0.34 x 3 is 1.02, not 1.0200000000000002)."""
    if math.isnan(per_gpu_usd_hr):
        return math.nan
    return float(Decimal(repr(per_gpu_usd_hr)) * count)


SOURCE = RunPodSource()
