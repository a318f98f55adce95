"""Lambda Cloud ``GET /api/v1/instance-types``: an offer per instance type and region with room.

``data`` is a map keyed by instance type name; each entry has ``instance_type`` (with
``price_cents_per_hour``, integer US cents for the whole instance, and ``specs``) and
``regions_with_capacity_available``. Lambda has one price for every region and no spot market.
A type with no region with capacity cannot be rented now: it is counted and left out. Errors
come as ``{"error": {"code", "message", "suggestion"}}``. Rate limit: 1 request per second.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import Counter
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gpucost.catalog import get_gpu
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
    parsing,
    resolve_gpu,
)
from gpucost.providers.lambda_cloud import PROVIDER

INSTANCE_TYPES_PATH = "/api/v1/instance-types"
CENTS_PER_USD = Decimal(100)
# "A100 (40 GB SXM4)", "H100 (80 GB PCIe)", "A10 (24 GB PCIe)"
_GPU_DESCRIPTION = re.compile(r"^(?P<model>.+?)\s*\((?P<memory>\d+(?:\.\d+)?)\s*GB"
                              r"(?:\s+(?P<form>[A-Za-z0-9]+))?\)")


def gpu_from_description(description: str) -> str | None:
    """The catalog name for Lambda's ``gpu_description``, or None."""
    match = _GPU_DESCRIPTION.match(description.strip())
    if not match:
        return resolve_gpu(description)
    model, memory, form = match["model"], float(match["memory"]), match["form"]
    for candidate in (f"{model} {form} {memory:g}GB" if form else None, f"{model} {memory:g}GB",
                      model):
        if candidate:
            found = resolve_gpu(candidate, memory_gb=memory)
            if found:
                return found
    return None


class LambdaSource(HttpPriceSource, declared=PROVIDER):
    credentials_hint = "set LAMBDA_API_KEY (cloud.lambda.ai/api-keys)"
    api_key_env = "LAMBDA_API_KEY"
    default_base_url = "https://cloud.lambda.ai"
    min_interval_s = 1.0

    def fetch(self, client: RetryingHttp, *, now: dt.datetime | None = None) -> Snapshot:
        fetched_at = now_utc(now)
        answer = client.get_json(INSTANCE_TYPES_PATH)
        with parsing(self.name, "instance-types answer"):
            expect(answer, dict, "the answer")
            if "error" in answer:
                error = answer["error"]
                message = error.get("message", error) if isinstance(error, dict) else error
                if isinstance(error, dict) and "auth" in str(error.get("code", "")):
                    raise CredentialsError(f"{self.name}: {message}", hint="check LAMBDA_API_KEY")
                raise ProviderError(f"{self.name}: API error: {message}")
            types = expect(answer["data"], dict, "data")
        rows, dropped = self.parse_types(types)
        return counted_snapshot(
            self, rows, dropped, fetched_at=fetched_at, endpoint=INSTANCE_TYPES_PATH,
            read=("instance_types", len(types)),
            units="price_cents_per_hour (integer cents, whole instance) / 100")

    def parse_types(self, types: Mapping[str, Any]) -> tuple[list[dict[str, Any]], Counter[str]]:
        rows = []
        dropped: Counter[str] = Counter()
        rates = offer_rates(self.provider)
        for key, entry in sorted(types.items()):
            with parsing(self.name, f"instance type {key!r}"):
                expect(entry, dict, "entry")
                spec = expect(entry["instance_type"], dict, "instance_type")
                specs = expect(spec["specs"], dict, "specs")
                cents = expect(spec["price_cents_per_hour"], int, "price_cents_per_hour")
                if cents < 0:
                    raise ValueError(f"price_cents_per_hour is {cents}")
                hourly = float(Decimal(cents) / CENTS_PER_USD)
                count = float(expect(specs["gpus"], int, "specs.gpus"))
                regions = expect(entry["regions_with_capacity_available"], list,
                                 "regions_with_capacity_available")
                gpu = gpu_from_description(str(spec.get("gpu_description", "")))
                if gpu is None or count <= 0:
                    dropped["GPU not in catalog"] += 1
                    continue
                if not regions:
                    dropped["no region with capacity"] += 1
                    continue

                for region in regions:
                    rows.append({
                        "provider": self.provider, "region": str(expect(region, dict, "region")
                                                                 ["name"]),
                        "instance_type": str(spec["name"]), "gpu": gpu, "gpu_count": count,
                        "gpu_memory_gb": get_gpu(gpu).memory_gb,
                        "vcpus": float(specs.get("vcpus", math.nan)),
                        "ram_gb": float(specs.get("memory_gib", math.nan)),
                        "price_hr": hourly, "spot_price_hr": math.nan,
                        **rates, "intra_node_link": gpu_link(gpu),
                    })
        return rows, dropped


SOURCE = LambdaSource()
