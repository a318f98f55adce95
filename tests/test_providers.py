"""The provider registry (issue 24 item 1): what gpucost knows about each provider, in one module
per provider.

``OLD_*`` below are the per-provider tables as they stood in their eight modules before the
registry (pricing/rates.py, limits.NODE_LIMITS, executor.SKYPILOT_CLOUDS, planfile.MARKETPLACES,
marketplace's reliability default, preflight's cross-continent transfer prices, the SkyPilot
hosted catalog's clouds and memory columns, the snapshot format's Arm instance prefixes, each
price source's provider and month). The first test reads them
through the functions every caller uses; it was written against the old tables and passes
unchanged against the registry.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w

from gpucost.errors import UnknownProviderError
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
OLD_ARM_INSTANCE_PREFIXES = {"aws": ("g5g.",)}  # the snapshot format's Graviton GPU machines
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
    from gpucost.pricing.sources.registry import sources

    assert {name: (s.provider, s.month_hours) for name, s in sources().items()} == OLD_SOURCES


# --- the registry ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_each_declaration_holds_what_the_old_tables_said(name: str) -> None:
    from gpucost import providers

    p = providers.get(name)
    if name in OLD_RATES:
        assert p.rates is not None
        kind, running, stopped, egress, ingress, month, source, as_of = OLD_RATES[name]
        assert (p.rates.storage_kind, p.rates.storage_gb_month, p.rates.storage_stopped_gb_month,
                p.rates.egress_gb, p.rates.ingress_gb, p.month_hours, p.rates.source,
                p.rates.as_of) == (kind, running, stopped, egress, ingress, month, source, as_of)
    else:
        assert p.rates is None and p.month_hours == 730.0
    assert p.max_nodes == OLD_NODE_LIMITS.get(name)
    assert (p.skypilot is not None) == (name in OLD_SKYPILOT_CLOUDS)
    # The executor hands a plan's provider to SkyPilot as its cloud: the names must agree.
    assert p.skypilot is None or p.skypilot.cloud == name
    assert (p.skypilot is not None and p.skypilot.hosted_catalog) == (
        name in OLD_HOSTED_CATALOG_CLOUDS)
    assert (p.skypilot is not None and p.skypilot.catalog_memory == "per_gpu") == (
        name in OLD_CATALOG_MEMORY_PER_GPU)
    reliability = p.marketplace.min_reliability if p.marketplace else None
    assert reliability == OLD_MARKETPLACE_RELIABILITY.get(name)
    assert p.cross_continent_usd_gb == OLD_CROSS_CONTINENT_USD_GB.get(name)
    assert (p.price_source is not None) == (name in OLD_SOURCES)
    assert p.arm_instance_prefixes == OLD_ARM_INSTANCE_PREFIXES.get(name, ())


def test_the_registry_lists_exactly_the_providers_the_old_tables_named() -> None:
    from gpucost import providers
    from gpucost.pricing.sources.skypilot_http import hosted_catalog_clouds

    assert [p.name for p in providers.all()] == NAMES
    assert providers.node_limits() == OLD_NODE_LIMITS
    assert set(providers.skypilot_clouds()) == set(OLD_SKYPILOT_CLOUDS)
    assert hosted_catalog_clouds() == OLD_HOSTED_CATALOG_CLOUDS
    with pytest.raises(UnknownProviderError, match="known: aws, azure"):
        providers.get("acme")


def test_every_sourced_rule_row_names_a_registered_provider() -> None:
    """The sourced rule tables (setup time, fabric, interruption rate) stay CSV files keyed by
    provider name: a row for a provider the registry does not know (a typo, a provider
    removed) would never match an offer."""
    import csv

    from gpucost import providers
    from gpucost.model import fabrics, interruptions, setup_times

    known = {p.name for p in providers.all()} | {"*"}
    for path in (fabrics.CSV_PATH, setup_times.TABLE_PATH, interruptions.TABLE_PATH):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines()
                 if not line.startswith("#")]
        keys = {row["provider"] for row in csv.DictReader(lines)}
        assert keys and keys <= known, (path.name, keys - known)


# --- adding a provider is one new module --------------------------------------------------------

ACME = '''"""A throwaway provider: its declaration and its price source in one module."""

import datetime as dt

from gpucost.pricing.rates import offer_rates
from gpucost.pricing.sources.base import HttpPriceSource, build_snapshot, now_utc
from gpucost.providers._provider import Marketplace, Provider, Rates, SkyPilot

PROVIDER = Provider(
    name="acme", display_name="Acme GPUs", month_hours=720.0,
    rates=Rates("acme block disk", 0.05, 0.07, 0.01, 0.02, "https://acme.example", "2026-01"),
    max_nodes=2,
    # How SkyPilot's catalog of it reads and how a plan becomes its resources.
    skypilot=SkyPilot("acme", hosted_catalog=True, sxm_families=("acme8",),
                      network_gbps={"acme8.big": 800.0}, label="Acme",
                      accelerator=lambda gpu, _type: "ACME-" + gpu.split(" ")[0],
                      pins_instance_type=False, mounts_object_store=False),
    marketplace=Marketplace(min_reliability=0.5), cross_continent_usd_gb=0.03,
    price_source=f"{__name__}:SOURCE",
)


class AcmeSource(HttpPriceSource):
    name = PROVIDER.name
    provider = PROVIDER.name
    month_hours = PROVIDER.month_hours
    credentials_hint = ""
    default_base_url = "http://127.0.0.1:9"

    def find_credentials(self, env, home):
        return ""

    def fetch(self, client, *, now=None):
        row = {"provider": self.provider, "region": "US", "instance_type": "acme-1x4090",
               "gpu": "RTX 4090", "gpu_count": 1, "price_hr": 0.5, **offer_rates(self.provider)}
        return build_snapshot(self, [row], fetched_at=now_utc(now), provenance={})


SOURCE = AcmeSource()
'''


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``acme.py`` dropped beside the shipped provider modules, the registries rebuilt."""
    from gpucost import providers
    from gpucost.pricing.sources import registry

    (tmp_path / "acme.py").write_text(ACME, encoding="utf-8")
    monkeypatch.setattr(providers, "__path__", [*providers.__path__, str(tmp_path)])
    monkeypatch.setattr(providers, "_REGISTRY", {})
    monkeypatch.setattr(registry, "_SOURCES", {})
    yield tmp_path
    sys.modules.pop("gpucost.providers.acme", None)


def test_a_new_provider_module_reaches_every_reader(acme: Path) -> None:
    from gpucost import providers
    from gpucost.pricing.sources.registry import get_source
    from gpucost.pricing.sources.skypilot_http import hosted_catalog_clouds

    assert providers.get("acme").display_name == "Acme GPUs"
    rates = rates_for("acme")
    assert rates is not None and rates.stopped_gb_month == 0.07
    assert month_hours_for("acme") == 720.0
    assert offer_rates("acme") == {"storage_gb_month": 0.05, "egress_gb": 0.01,
                                   "ingress_gb": 0.02, "month_hours": 720.0}
    assert node_limit("acme") == 2 and providers.node_limits()["acme"] == 2
    assert "acme" in providers.skypilot_clouds() and "acme" in hosted_catalog_clouds()
    assert _search_reliability("acme") == 0.5
    source = get_source("acme")
    assert (source.provider, source.month_hours) == ("acme", 720.0)
    offers = source.fetch(None).offers
    assert list(offers.columns["storage_gb_month"]) == [0.05]
    assert "aws" in providers.skypilot_clouds()  # the shipped ones are still there


def test_a_new_provider_modules_catalog_rules_reach_the_skypilot_import(acme: Path) -> None:
    """Its SXM instance families and stated bandwidths are read from its declaration alone."""
    from gpucost.pricing.sources.skypilot_catalog import import_skypilot_catalog

    folder = acme / "catalog"
    folder.mkdir()
    (folder / "acme_vms_gpu.csv").write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,"
        "Region,AvailabilityZone\n"
        "acme8.big,A100,8,96,1152,,20.0,,us-east,\n"
        "acme2.small,A100,2,24,256,,5.0,,us-east,\n", encoding="utf-8")
    (snapshot,) = import_skypilot_catalog(folder, fetched_at="2026-01-01")
    assert snapshot.source == "skypilot-acme"
    cols = snapshot.offers.columns
    got = {t: (g, n) for t, g, n in zip(cols["instance_type"], cols["gpu"], cols["network_gbps"],
                                        strict=True)}
    assert got["acme8.big"] == ("A100 SXM4 40GB", 800.0)
    assert got["acme2.small"][0] == "A100 PCIe 40GB" and math.isnan(got["acme2.small"][1])


def test_a_new_provider_module_reaches_the_executor_and_the_command_line(acme: Path) -> None:
    """In a fresh interpreter, as a user would have it: the executor's SkyPilot mapping and
    `compare --help` read the registry when they load."""
    code = (
        "import sys, gpucost.providers as p; p.__path__.append(sys.argv[1]); "
        "from gpucost.executor import SKYPILOT_CLOUDS, provider_config; "
        "print(provider_config('acme'), 'acme' in SKYPILOT_CLOUDS); "
        "from gpucost.cli import main; main(['compare', '--help'])"
    )
    out = subprocess.run([sys.executable, "-c", code, str(acme)], capture_output=True,
                         text=True, check=False, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "{'cloud': 'acme'} True" in out.stdout
    assert "one node on local, runpod" in " ".join(out.stdout.split())
    assert "acme" not in out.stdout.split("one node on")[1]  # acme groups 2 nodes


def test_a_new_provider_modules_skypilot_rules_reach_the_task(acme: Path) -> None:
    """In a fresh interpreter (the executor reads the registry when it loads): its accelerator
    spelling, an instance type it does not pin, and no object store mounted."""
    plan = {
        "schema": "gpucost-plan", "schema_version": 1,
        "job": {"name": "ft", "command": ["python", "train.py"], "samples": 1e6},
        "offer": {"provider": "acme", "region": "us-east", "instance_type": "acme8.big",
                  "gpu": "A100 SXM4 40GB", "gpu_count": 8, "nodes": 1, "market": "on-demand",
                  "price_hr": 20.0},
        "workload": {"throughput": 5000.0},
        "safety": {"timeout_hours": 3.0, "budget_cap_usd": 90.0},
        "checkpoint": {"enabled": True, "every_epochs": 1.0, "target": "s3://b/ck"},
        "estimate": {"hours": 2.0, "cost_usd": 40.0},
    }
    path = acme / "plan.toml"
    path.write_text(tomli_w.dumps(plan), encoding="utf-8")
    code = (
        "import json, sys, gpucost.providers as p; p.__path__.append(sys.argv[1]); "
        "from gpucost.executor.skypilot_task import not_enforced, task_config; "
        "from gpucost.planfile import load_plan; plan = load_plan(sys.argv[2]); "
        "task = task_config(plan); "
        "print(json.dumps([task['resources'], 'file_mounts' in task, not_enforced(plan)]))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(acme), str(path)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    resources, mounted, said = json.loads(out.stdout)
    assert resources["infra"] == "acme/us-east" and resources["accelerators"] == "ACME-A100:8"
    assert "instance_type" not in resources and not mounted
    assert any(line.startswith("acme: SkyPilot chooses the machine at launch, from its own Acme "
                               "catalog") for line in said), said
    assert any("SkyPilot mounts no object store on Acme" in line for line in said), said


def test_the_registry_loads_light() -> None:
    """The command line reads the registry to build its help: declarations import no numpy,
    and no price source (httpx, boto3) until a refresh asks for one."""
    code = ("import sys; from gpucost import providers; providers.all(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('numpy', 'httpx', 'boto3', 'pandas') or m.startswith('gpucost.pricing') "
            "or m.startswith('gpucost.providers.prices')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
