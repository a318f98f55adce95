"""Azure, GCP, Vast, RunPod, Lambda and SkyPilot-hosted sources on recorded answers over loopback.

Each source is opened the way `gpucost prices refresh` opens it (``open_client`` with the
replay server as base URL), so the requests, auth, paging and unit conversions are all real.
Prices in the fixtures are composed (see tests/fixtures/api/README.md).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_replay import FIXTURES, ReplayServer, Reply, file_reply, install_all, json_reply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpucost.errors import CredentialsError, ProviderError
from gpucost.http import RetryingHttp
from gpucost.pricing.snapshot import Snapshot
from gpucost.pricing.sources.base import PriceSource
from gpucost.pricing.sources.registry import get_source

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as s:
        yield s


def fetch(source_name: str, server: ReplayServer, secret: str = "test-key-1") -> Snapshot:
    source = get_source(source_name)
    with source.open_client(server.url, secret) as client:
        client.sleep = lambda _: None  # retries without waiting
        snapshot: Snapshot = source.fetch(client, now=NOW)
    return snapshot


def rows(snapshot: Snapshot) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["region"], r["instance_type"]): r for r in snapshot.offers.to_records()}


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_bytes())


# ------------------------------------------------------------------------------------- Azure

def test_azure_follows_next_page_link_and_tells_markets_apart(server: ReplayServer) -> None:
    install_all(server)
    snap = fetch("azure", server)
    paths = [r for r in server.requests if r.path == "/api/retail/prices"]
    assert len(paths) == 2  # NextPageLink to prices.azure.com was followed on the replay host
    assert paths[1].query["$skip"] == ["1000"]
    assert "armSkuName eq 'Standard_ND96isr_H100_v5'" in paths[0].query["$filter"][0]
    offers = rows(snap)
    a100 = offers[("eastus", "Standard_NC24ads_A100_v4")]
    # pay-as-you-go Linux, not the Windows 3.857 / DevTest / Reservation 19318.0 rows
    assert a100["price_hr"] == 3.673
    assert a100["spot_price_hr"] == 0.7346  # the Spot row, not "Low Priority"
    assert a100["gpu"] == "A100 PCIe 80GB" and a100["gpu_count"] == 1
    h100 = offers[("eastus", "Standard_ND96isr_H100_v5")]
    assert (h100["gpu_count"], h100["price_hr"], h100["intra_node_link"]) == (8, 98.32, "nvlink")
    assert len(offers) == 3  # F16s (no GPU) and E64 (Reservation) are not offers
    dropped = snap.provenance["items_dropped"]
    assert dropped["Windows"] == 2 and dropped["Low Priority"] == 1
    assert snap.month_hours == 730


def test_azure_refuses_a_non_hourly_unit(server: ReplayServer) -> None:
    page = fixture("azure_page2.json")
    page["Items"][1]["unitOfMeasure"] = "1/Month"
    server.add("GET", "/api/retail/prices", json_reply(page))
    with pytest.raises(ProviderError, match="unitOfMeasure '1/Month'"):
        fetch("azure", server)


# --------------------------------------------------------------------------------------- GCP

def test_gcp_composes_gpu_core_and_ram_skus_exactly(server: ReplayServer) -> None:
    install_all(server)
    snap = fetch("gcp", server, secret="AIza-gcp-key")
    calls = [r for r in server.requests if r.path.endswith("/skus")]
    assert "pageToken" not in calls[0].query
    assert calls[1].query["pageToken"][0].startswith("APKCS1HVa0Yp")
    assert all(r.query["key"] == ["AIza-gcp-key"] for r in calls)  # key in the query, not logged
    offers = rows(snap)
    # a2-highgpu-1g = 1 x 2.933908 + 12 x 0.031611 + 85 x 0.004237 (units + nanos, exact)
    a2 = offers[("us-central1", "a2-highgpu-1g")]
    assert a2["price_hr"] == float("3.673385")
    assert offers[("us-east1", "a2-highgpu-8g")]["price_hr"] == float("29.38708")
    assert math.isnan(a2["spot_price_hr"])  # no spot A2 core/RAM SKU: no spot machine price
    # a3-highgpu-8g spot = 8 x 2.253 + 208 x 0.007392 + 1872 x 0.000741 (composed SKUs)
    a3 = offers[("us-central1", "a3-highgpu-8g")]
    assert a3["price_hr"] == pytest.approx(8 * 11.0609 + 208 * 0.029563 + 1872 * 0.002963,
                                           rel=0, abs=1e-9)
    assert a3["spot_price_hr"] == pytest.approx(8 * 2.253 + 208 * 0.007392 + 1872 * 0.000741,
                                                rel=0, abs=1e-9)
    # T4 on N1: n1-standard-8 = 1 x 0.35 + 8 x 0.031611 + 30 x 0.004237 (composed SKUs)
    n1 = offers[("europe-west4", "n1-standard-8")]
    assert (n1["gpu"], n1["gpu_count"], n1["vcpus"], n1["ram_gb"]) == ("T4", 1, 8, 30)
    assert n1["price_hr"] == pytest.approx(0.35 + 8 * 0.031611 + 30 * 0.004237, rel=0, abs=1e-12)
    assert offers[("us-central1", "n1-standard-32")]["gpu_count"] == 4
    # Balanced PD is $0.10 per GiB-month in us-central1: $0.0931 per GB-month
    assert a2["storage_gb_month"] == pytest.approx(0.1 * 10**9 / 2**30)
    assert snap.provenance["skus_used"]["usage Commit1Yr"] == 1


def test_gcp_skips_without_a_key_and_says_how() -> None:
    source = get_source("gcp")
    assert source.find_credentials({}, FIXTURES) is None
    assert "GOOGLE_API_KEY" in source.credentials_hint


# -------------------------------------------------------------------------------------- Vast

def test_vast_units_and_verification(server: ReplayServer) -> None:
    install_all(server)
    snap = fetch("vast", server, secret="vast-secret")
    request = next(r for r in server.requests if r.path == "/api/v0/bundles/")
    assert request.headers["authorization"] == "Bearer vast-secret"
    assert request.json()["type"] == "on-demand" and request.json()["verified"] == {"eq": True}
    offers = {r["instance_type"]: r for r in snap.offers.to_records()}
    assert "26004417" not in offers  # the unverified A100 host
    x1 = offers["24768912"]
    assert x1["price_hr"] == 0.32  # dph_base, the disk is priced on its own
    assert x1["storage_gb_month"] == 0.15 and x1["month_hours"] == 720
    assert (x1["egress_gb"], x1["ingress_gb"]) == (0.003, 0.004)
    assert x1["spot_price_hr"] == 0.18  # min_bid
    assert x1["network_gbps"] == pytest.approx(0.8124)  # 812.4 Mbit/s
    assert x1["gpu_memory_gb"] == pytest.approx(23.99)  # 24564 MiB
    assert x1["reliability"] == 0.9981 and x1["region"] == "SE-Sweden"
    h100 = offers["25411870"]
    assert (h100["gpu"], h100["gpu_count"]) == ("H100 SXM5 80GB", 8)
    # dph_total = dph_base + storage_cost x allocated 5 GB / 720 h: the 720-hour month
    raw = next(o for o in fixture("vast_bundles.json")["offers"] if o["id"] == 24768912)
    assert raw["dph_total"] == pytest.approx(x1["price_hr"] + x1["storage_gb_month"] * 5 / 720,
                                             abs=1e-6)


def test_vast_key_from_the_cli_config_file(tmp_path: Any) -> None:
    key_file = tmp_path / ".config" / "vastai" / "vast_api_key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text("file-key\n")
    source = get_source("vast")
    assert source.find_credentials({}, tmp_path) == "file-key"
    assert source.find_credentials({"VAST_API_KEY": "env-key"}, tmp_path) == "env-key"
    assert source.find_credentials({}, tmp_path / "nobody") is None


def test_vast_is_rate_limited_to_ten_searches_a_minute() -> None:
    assert get_source("vast").min_interval_s >= 6.0
    assert get_source("lambda").min_interval_s >= 1.0


# ------------------------------------------------------------------------------------ RunPod

def test_runpod_multiplies_per_gpu_prices_by_pod_size(server: ReplayServer) -> None:
    install_all(server)
    snap = fetch("runpod", server)
    offers = rows(snap)
    one = offers[("community-cloud", "1x NVIDIA GeForce RTX 4090")]
    four = offers[("community-cloud", "4x NVIDIA GeForce RTX 4090")]
    assert (one["price_hr"], four["price_hr"]) == (0.34, 1.36)
    assert (one["spot_price_hr"], four["spot_price_hr"]) == (0.2, 0.8)
    assert offers[("secure-cloud", "8x NVIDIA GeForce RTX 4090")]["price_hr"] == 4.72
    assert {r["gpu_count"] for r in snap.offers.to_records()} <= {1, 2, 4, 8}
    assert one["month_hours"] == 720 and one["storage_gb_month"] == 0.10


def test_runpod_graphql_errors_arrive_with_http_200(server: ReplayServer) -> None:
    server.add("POST", "/graphql", file_reply("runpod_error.json"))
    with pytest.raises(ProviderError, match="GraphQL error: There are no longer any instances"):
        fetch("runpod", server)


def test_runpod_rejected_key_is_a_credentials_error(server: ReplayServer) -> None:
    server.add("POST", "/graphql", json_reply({"errors": [{"message": "Unauthorized"}]}))
    with pytest.raises(CredentialsError):
        fetch("runpod", server)


# ------------------------------------------------------------------------------------ Lambda

def test_lambda_cents_per_hour_and_regions_with_capacity(server: ReplayServer) -> None:
    install_all(server)
    snap = fetch("lambda", server)
    offers = rows(snap)
    assert offers[("us-east-1", "gpu_1x_a10")]["price_hr"] == 0.75  # 75 cents
    h100 = offers[("us-east-1", "gpu_8x_h100_sxm5")]
    assert (h100["price_hr"], h100["gpu"], h100["gpu_count"]) == (23.92, "H100 SXM5 80GB", 8)
    assert math.isnan(h100["spot_price_hr"])
    assert not any(k[1] == "gpu_1x_a100_sxm4" for k in offers)  # no region with capacity
    assert snap.provenance["instance_types_dropped"] == {"no region with capacity": 2}


def test_lambda_error_envelope(server: ReplayServer) -> None:
    server.add("GET", "/api/v1/instance-types",
               json_reply({"error": {"code": "global/unknown", "message": "try later"}}))
    with pytest.raises(ProviderError, match="API error: try later"):
        fetch("lambda", server)


# ---------------------------------------------------------------------------- SkyPilot hosted

def test_skypilot_hosted_reuses_the_importer(server: ReplayServer) -> None:
    install_all(server)
    snap = fetch("skypilot-hosted", server, secret="")
    providers = sorted(set(snap.offers["provider"].tolist()))
    assert providers == ["aws", "gcp", "lambda", "runpod"]
    assert set(snap.offers["source"].tolist()) == {"skypilot-hosted"}
    assert sorted(snap.provenance["clouds_missing"]) == ["azure", "vast"]  # 404 upstream
    gcp = next(r for r in snap.offers.to_records() if r["provider"] == "gcp")
    assert gcp["price_hr"] == pytest.approx(2.9 + 0.8)  # GPU row + host row, by the importer
    assert snap.provenance["clouds"]["aws"]["rows_skipped"] == {"not a GPU": 1}


def test_skypilot_hosted_with_nothing_upstream_fails(server: ReplayServer) -> None:
    with pytest.raises(ProviderError, match="no catalog found"):
        fetch("skypilot-hosted", server, secret="")


# ------------------------------------------------------------------ malformed and truncated

JSON_SOURCES = {
    "azure": ("GET", "/api/retail/prices", "azure_page2.json"),
    "gcp": ("GET", "/v1/services/6F81-5844-456A/skus", "gcp_page2.json"),
    "vast": ("POST", "/api/v0/bundles/", "vast_bundles.json"),
    "runpod": ("POST", "/graphql", "runpod_gpu_types.json"),
    "lambda": ("GET", "/api/v1/instance-types", "lambda_instance_types.json"),
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(
        max_size=8), lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.text(max_size=6), children, max_size=3), max_leaves=8)


def _mutations(payload: Any) -> st.SearchStrategy[Any]:
    """The payload with one value somewhere replaced by arbitrary JSON, or a key removed."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node[:2]):
                walk(v, (*path, i))

    walk(payload, ())

    def apply(path: tuple[Any, ...], value: Any, delete: bool) -> Any:
        doc = json.loads(json.dumps(payload))
        if not path:
            return value
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if delete and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
        return doc

    return st.builds(apply, st.sampled_from(paths), json_values, st.booleans())


def _serve_once(source: PriceSource[Any], method: str, path: str, body: bytes) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if (request.method, request.url.path) != (method, path):
            return httpx.Response(404, content=b"no such path")
        return httpx.Response(200, content=body)

    raw = httpx.Client(base_url="http://replay.test", transport=httpx.MockTransport(handler))
    client = RetryingHttp(raw, source=source.name, max_attempts=1)
    source.fetch(client, now=NOW)


@pytest.mark.parametrize("name", sorted(JSON_SOURCES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_malformed_payloads_raise_provider_error_only(name: str, data: st.DataObject) -> None:
    method, path, fixture_name = JSON_SOURCES[name]
    good = fixture(fixture_name)
    source = get_source(name)
    mutated = data.draw(_mutations(good))
    try:
        _serve_once(source, method, path, json.dumps(mutated).encode())
    except ProviderError as exc:
        assert str(exc).startswith(f"{name}: ")  # names the source; one line
        assert "\n" not in str(exc)


@pytest.mark.parametrize("name", sorted(JSON_SOURCES))
@settings(max_examples=25, deadline=None)
@given(cut=st.floats(0.0, 0.999))
def test_truncated_payloads_raise_provider_error(name: str, cut: float) -> None:
    method, path, fixture_name = JSON_SOURCES[name]
    body = (FIXTURES / fixture_name).read_bytes().rstrip()
    with pytest.raises(ProviderError, match=f"^{name}: .*not JSON"):
        _serve_once(get_source(name), method, path, body[:int(len(body) * cut)])


def test_a_source_error_never_leaks_the_key(server: ReplayServer) -> None:
    server.add("POST", "/graphql", Reply(500, b"boom runpod-secret-key"))
    with pytest.raises(ProviderError) as err:
        fetch("runpod", server, secret="runpod-secret-key")
    assert "runpod-secret-key" not in str(err.value)
