"""The provider registry (issue 24 item 1): what gpucost knows about each provider, in one module
per provider.

``OLD_*`` below are the per-provider tables as they stood in their eight modules before the
registry (pricing/rates.py, limits.NODE_LIMITS, executor.SKYPILOT_CLOUDS, planfile.MARKETPLACES,
marketplace's reliability default, preflight's cross-continent transfer prices, the SkyPilot
hosted catalog's clouds, each price source's provider and month). The first test reads them
through the functions every caller uses; it was written against the old tables and passes
unchanged against the registry.
"""

from __future__ import annotations

import math

import pytest

from gpucost.limits import MAX_NODES, node_limit
from gpucost.pricing.rates import month_hours_for, offer_rates, rates_for

_AWS = ("https://aws.amazon.com/ebs/pricing/ (gp3 $0.08/GB-month); "
        "https://aws.amazon.com/ec2/pricing/on-demand/ Data Transfer (first 10 TB/month out "
        "$0.09/GB, in free)")
_GCP = ("https://cloud.google.com/compute/disks-image-pricing (pd-balanced $0.100/GB-month); "
        "https://cloud.google.com/vpc/network-pricing (Premium Tier internet egress 0-1 TiB "
        "$0.12/GB, ingress free)")
_AZURE = ("https://azure.microsoft.com/pricing/details/managed-disks/ (P30 1,024 GiB "
          "$135.17/month); https://azure.microsoft.com/pricing/details/bandwidth/ (internet "
          "egress from North America, first 10 TB, $0.087/GB; ingress free)")
_LAMBDA = ("https://lambda.ai/pricing (filesystem storage $0.20/GB-month; no egress or ingress "
           "fees). Lambda instances cannot be stopped, only terminated: keep data on a "
           "filesystem")
_RUNPOD = ("https://docs.runpod.io/pods/pricing (volume disk $0.10/GB-month running, "
           "$0.20/GB-month while the pod is stopped; network volume $0.07/GB-month; no data "
           "transfer fees)")
_VAST = ("https://docs.vast.ai (each offer states storage_cost $/GB-month billed on 720 h, and "
         "inet_up_cost/inet_down_cost $/GB; see a snapshot from the Vast API)")

# provider -> (storage kind, running, stopped, egress, ingress, month hours, source, as of)
OLD_RATES = {
    "aws": ("EBS gp3 (us-east-1)", 0.08, None, 0.09, 0.0, 730.0, _AWS, "2025-06"),
    "gcp": ("pd-balanced (us-central1)", 0.10, None, 0.12, 0.0, 730.0, _GCP, "2025-06"),
    "azure": ("Premium SSD P30, 1 TiB (East US), approx. per GB", 0.132, None, 0.087, 0.0,
              730.0, _AZURE, "2025-06"),
    "lambda": ("persistent filesystem", 0.20, None, 0.0, 0.0, 730.0, _LAMBDA, "2025-06"),
    "runpod": ("pod volume disk", 0.10, 0.20, 0.0, 0.0, 720.0, _RUNPOD, "2025-06"),
    "vast": ("per offer (storage_cost)", None, None, None, None, 720.0, _VAST, "2025-06"),
}
OLD_NODE_LIMITS = {"local": 1, "runpod": 1, "shadeform": 1, "vast": 1, "verda": 1}
OLD_SKYPILOT_CLOUDS = ("aws", "gcp", "azure", "lambda", "runpod", "vast", "oci", "paperspace",
                       "fluidstack", "cudo", "nebius", "do", "shadeform", "verda")
OLD_MARKETPLACE_RELIABILITY = {"vast": 0.95, "runpod": 0.0}  # providers that plan a search
OLD_CROSS_CONTINENT_USD_GB = {"aws": 0.02, "azure": 0.05, "gcp": 0.08}  # others: 0.09
OLD_HOSTED_CATALOG_CLOUDS = ("aws", "azure", "gcp", "lambda", "runpod", "vast")
OLD_CATALOG_MEMORY_PER_GPU = ("aws", "gcp", "lambda", "nebius", "verda")
OLD_SOURCES = {"aws": ("aws", 730.0), "azure": ("azure", 730.0), "gcp": ("gcp", 730.0),
               "lambda": ("lambda", 730.0), "runpod": ("runpod", 720.0),
               "vast": ("vast", 720.0), "skypilot-hosted": ("skypilot", 730.0)}
NAMES = sorted({*OLD_RATES, *OLD_NODE_LIMITS, *OLD_SKYPILOT_CLOUDS})


def _search_reliability(provider: str) -> float | None:
    from gpucost.marketplace import search_for

    search = search_for(provider=provider, gpu_count=1, price_hr=1.0, region="US",
                        download_gbps=1.0, disk_gb=10, bandwidth_assumed=False)
    return None if search is None else search.min_reliability


@pytest.mark.parametrize("name", NAMES)
def test_every_reader_sees_what_the_old_tables_said(name: str) -> None:
    from gpucost.executor import SKYPILOT_CLOUDS, provider_config

    rates = rates_for(name)
    if name in OLD_RATES:
        assert rates is not None
        kind, running, stopped, egress, ingress, month, source, as_of = OLD_RATES[name]
        assert (rates.storage_kind, rates.storage_gb_month, rates.storage_stopped_gb_month,
                rates.egress_gb, rates.ingress_gb, rates.source, rates.as_of) == (
            kind, running, stopped, egress, ingress, source, as_of)
        assert month_hours_for(name) == month
    else:
        assert rates is None and month_hours_for(name) == 730.0
        assert all(math.isnan(offer_rates(name)[k])
                   for k in ("storage_gb_month", "egress_gb", "ingress_gb"))
    assert node_limit(name) == OLD_NODE_LIMITS.get(name, MAX_NODES)
    assert (name in SKYPILOT_CLOUDS) == (name in OLD_SKYPILOT_CLOUDS)
    assert provider_config(name) == ({"cloud": name} if name in OLD_SKYPILOT_CLOUDS else {})
    assert _search_reliability(name) == OLD_MARKETPLACE_RELIABILITY.get(name)


def test_the_price_sources_bill_as_before() -> None:
    from gpucost.pricing.sources.base import sources

    assert {name: (s.provider, s.month_hours) for name, s in sources().items()} == OLD_SOURCES
