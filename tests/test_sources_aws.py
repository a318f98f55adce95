"""The AWS source on recorded answers through botocore's Stubber: real boto3 clients, no network."""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from api_replay import FIXTURES
from botocore.stub import Stubber
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucost.errors import CredentialsError, ProviderError
from gpucost.providers.prices.aws import (
    GP3_FILTERS,
    ON_DEMAND_FILTERS,
    SOURCE,
    AwsClients,
    network_gbps,
)

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_bytes())


def client(service: str, region: str = "us-east-1") -> Any:
    return boto3.client(service, region_name=region, aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def filters(values: dict[str, str]) -> list[dict[str, str]]:
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in values.items()]


def spot_rows(region: str, rows: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    return {"SpotPriceHistory": [
        {"AvailabilityZone": zone, "InstanceType": itype, "ProductDescription": "Linux/UNIX",
         "SpotPrice": price, "Timestamp": dt.datetime.fromisoformat(stamp)}
        for itype, zone, price, stamp in rows]}


class Stubs:
    def __init__(self) -> None:
        self.pricing = client("pricing")
        self.ec2 = {r: client("ec2", r) for r in ("us-east-1", "us-west-2")}
        self.stubbers = [Stubber(self.pricing), *(Stubber(c) for c in self.ec2.values())]
        self.pricing_stub, self.east, self.west = self.stubbers

    def clients(self) -> AwsClients:
        return AwsClients(pricing=self.pricing, ec2_for_region=self.ec2.__getitem__)


@pytest.fixture
def stubs() -> Iterator[Stubs]:
    s = Stubs()
    for stub in s.stubbers:
        stub.activate()
    yield s
    for stub in s.stubbers:
        stub.assert_no_pending_responses()
        stub.deactivate()


def add_shapes(stubs: Stubs) -> None:
    stubs.east.add_response("describe_instance_types", fixture("aws_instance_types.json"),
                            {"MaxResults": 100})


def add_prices(stubs: Stubs) -> None:
    page1 = fixture("aws_get_products_page1.json")
    base = {"ServiceCode": "AmazonEC2", "Filters": filters(ON_DEMAND_FILTERS),
            "FormatVersion": "aws_v1", "MaxResults": 100}
    stubs.pricing_stub.add_response("get_products", page1, base)
    stubs.pricing_stub.add_response("get_products", fixture("aws_get_products_page2.json"),
                                    {**base, "NextToken": page1["NextToken"]})
    stubs.pricing_stub.add_response("get_products", fixture("aws_get_products_gp3.json"),
                                    {**base, "Filters": filters(GP3_FILTERS)})


def test_fetch_composes_on_demand_spot_shapes_and_disk(stubs: Stubs) -> None:
    add_shapes(stubs)
    add_prices(stubs)
    east_spot = fixture("aws_spot_price_history.json")
    stubs.east.add_response("describe_spot_price_history", east_spot, {
        "InstanceTypes": ["g4dn.xlarge", "g5.2xlarge", "g6.xlarge", "p4d.24xlarge",
                          "p5.48xlarge"],
        "ProductDescriptions": ["Linux/UNIX"], "StartTime": NOW})
    stubs.west.add_response("describe_spot_price_history", spot_rows("us-west-2", [
        ("p4d.24xlarge", "us-west-2a", "9.5000", "2026-11-30T11:00:00+00:00"),
        ("p4d.24xlarge", "us-west-2a", "7.0000", "2026-11-30T09:00:00+00:00"),  # older
        ("p4d.24xlarge", "us-west-2b", "9.9000", "2026-11-30T11:30:00+00:00"),
    ]), {"InstanceTypes": ["p4d.24xlarge"], "ProductDescriptions": ["Linux/UNIX"],
         "StartTime": NOW})

    snap = SOURCE.fetch(stubs.clients(), now=NOW)
    offers = {(r["region"], r["instance_type"]): r for r in snap.offers.to_records()}
    assert sorted(offers) == [("us-east-1", "g4dn.xlarge"), ("us-east-1", "g5.2xlarge"),
                              ("us-east-1", "g6.xlarge"), ("us-east-1", "p4d.24xlarge"),
                              ("us-east-1", "p5.48xlarge"), ("us-west-2", "p4d.24xlarge")]
    g5 = offers[("us-east-1", "g5.2xlarge")]
    assert g5["price_hr"] == 1.212  # "1.2120000000" as Decimal; the Reserved term is ignored
    assert g5["gpu"] == "A10G" and g5["gpu_memory_gb"] == pytest.approx(22888 / 1024)
    assert (g5["vcpus"], g5["ram_gb"]) == (8, 32)  # 32768 MiB
    expected_spot = min(float(r["SpotPrice"]) for r in east_spot["SpotPriceHistory"]
                        if r["InstanceType"] == "g5.2xlarge")
    assert g5["spot_price_hr"] == expected_spot  # the cheapest zone
    assert math.isnan(offers[("us-east-1", "g4dn.xlarge")]["spot_price_hr"])  # no spot row
    p4d_west = offers[("us-west-2", "p4d.24xlarge")]
    assert p4d_west["spot_price_hr"] == 9.5  # latest per zone (not the older 7.0), then cheapest
    p4d = offers[("us-east-1", "p4d.24xlarge")]
    assert (p4d["gpu"], p4d["gpu_count"], p4d["gpu_memory_gb"]) == ("A100 SXM4 40GB", 8, 40)
    assert p4d["network_gbps"] == 400 and p4d["intra_node_link"] == "nvlink"
    assert g5["storage_gb_month"] == 0.08 and g5["month_hours"] == 730  # gp3 us-east-1
    # the c5ad.2xlarge row is capacitystatus=UnusedCapacityReservation: dropped before anything
    assert snap.provenance["items_dropped"] == {"capacitystatus != Used": 1}


def test_fractional_gpus_count_as_their_partition(stubs: Stubs) -> None:
    add_shapes(stubs)
    shapes = SOURCE.instance_shapes(stubs.ec2["us-east-1"])
    g6f = shapes["g6f.large"]
    assert g6f.gpu_count == 0.125
    assert g6f.gpu_memory_gb == pytest.approx(2861 / 1024)
    assert shapes["p5en.48xlarge"].gpu_memory_gb == pytest.approx(141, abs=0.1)  # 144384 MiB


def test_instance_type_paging(stubs: Stubs) -> None:
    types = fixture("aws_instance_types.json")["InstanceTypes"]
    stubs.east.add_response("describe_instance_types",
                            {"InstanceTypes": types[:3], "NextToken": "t2"}, {"MaxResults": 100})
    stubs.east.add_response("describe_instance_types", {"InstanceTypes": types[3:]},
                            {"MaxResults": 100, "NextToken": "t2"})
    assert len(SOURCE.instance_shapes(stubs.ec2["us-east-1"])) == len(types)


@pytest.mark.parametrize("code, error", [("ThrottlingException", ProviderError),
                                         ("AccessDeniedException", CredentialsError)])
def test_client_errors_become_gpucost_errors(stubs: Stubs, code: str,
                                             error: type[Exception]) -> None:
    add_shapes(stubs)
    stubs.pricing_stub.add_client_error("get_products", service_error_code=code,
                                        service_message="nope", expected_params=None)
    with pytest.raises(error, match=f"pricing.get_products .*{code}"):
        SOURCE.fetch(stubs.clients(), now=NOW)


def test_a_price_list_item_that_is_not_json_is_a_provider_error(stubs: Stubs) -> None:
    add_shapes(stubs)
    page = fixture("aws_get_products_page2.json")
    page["PriceList"][0] = page["PriceList"][0][:40]
    stubs.pricing_stub.add_response("get_products", page, None)
    with pytest.raises(ProviderError, match=r"^aws: unexpected get_products answer"):
        SOURCE.fetch(stubs.clients(), now=NOW)


def test_an_item_without_on_demand_terms_is_dropped_not_fatal(stubs: Stubs) -> None:
    page = fixture("aws_get_products_page2.json")
    item = json.loads(page["PriceList"][0])
    stripped = copy.deepcopy(item)
    stripped["terms"] = {"Reserved": item["terms"].get("Reserved", {})}
    page["PriceList"] = [json.dumps(stripped)]
    stubs.pricing_stub.add_response("get_products", page, None)
    prices, dropped = SOURCE.on_demand_prices(stubs.pricing, {"p4d.24xlarge", "p5.48xlarge"})
    assert prices == {} and dropped == {"no hourly on-demand price": 1}


def test_network_performance_text() -> None:
    assert network_gbps("3200 Gigabit") == 3200
    assert network_gbps("4x 100 Gigabit") == 400
    assert math.isnan(network_gbps("Up to 25 Gigabit"))  # a burst figure, not sustained


def test_credentials_come_from_the_standard_chain(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Any) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert SOURCE.find_credentials({}, tmp_path) is None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    assert SOURCE.find_credentials({}, tmp_path) == ""  # found; boto3 keeps the secret


class _Fake:
    """A stand-in boto3 client: each operation is a given function (for fuzzing the parser)."""

    def __init__(self, **operations: Any) -> None:
        self.operations = operations

    def __getattr__(self, operation: str) -> Any:
        return self.operations[operation]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, max_size=3), max_leaves=8)


def _mutate(doc: Any, data: st.DataObject) -> Any:
    """``doc`` with one value replaced by arbitrary JSON or one key deleted."""
    node, path = doc, []
    while isinstance(node, dict | list) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict)
                                        else range(len(node))))
        path.append(key)
        node = node[key]
    if not path:
        return data.draw(json_values)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(json_values)
    return doc


@settings(max_examples=60, deadline=None)
@given(data=st.data(), target=st.sampled_from(["price", "shapes", "spot"]))
def test_malformed_aws_answers_raise_provider_error_only(data: st.DataObject,
                                                         target: str) -> None:
    page = fixture("aws_get_products_page2.json")
    item = json.loads(page["PriceList"][1])
    shapes = fixture("aws_instance_types.json")
    spot = fixture("aws_spot_price_history.json")
    if target == "price":
        page["PriceList"] = [json.dumps(_mutate(item, data))]
    elif target == "shapes":
        shapes = _mutate(shapes, data)
    else:
        spot = _mutate(spot, data)
    answers = iter([page, {"PriceList": []}])  # compute instances, then gp3
    pricing = _Fake(get_products=lambda **_: next(answers))
    ec2 = _Fake(describe_instance_types=lambda **_: shapes,
                describe_spot_price_history=lambda **_: spot)
    clients = AwsClients(pricing=pricing, ec2_for_region=lambda _: ec2)
    try:
        snap = SOURCE.fetch(clients, now=NOW)
    except ProviderError as exc:
        assert str(exc).startswith("aws: ") and "\n" not in str(exc)
    else:
        assert all(p >= 0 for p in snap.offers["price_hr"].tolist())


# The on-demand query as it must reach the Price List API, spelled out rather than built from
# ON_DEMAND_FILTERS, so that a filter dropped from the code fails here.
GPU_ONLY_REQUEST = {
    "ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1", "MaxResults": 100,
    "Filters": [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in (
        ("productFamily", "Compute Instance"), ("operatingSystem", "Linux"),
        ("tenancy", "Shared"), ("preInstalledSw", "NA"), ("capacitystatus", "Used"),
        ("licenseModel", "No License required"), ("marketoption", "OnDemand"),
        ("instanceFamily", "GPU instance"))],
}


def _item_with(item: dict[str, Any], **attributes: str) -> str:
    changed = copy.deepcopy(item)
    changed["product"]["attributes"].update(attributes)
    return json.dumps(changed)


def test_the_price_query_asks_the_api_for_gpu_instance_families_only(stubs: Stubs) -> None:
    # A filtered answer, as the API gives it: GPU families only (page 2 without its c5ad row).
    page = fixture("aws_get_products_page2.json")
    page["PriceList"] = [text for text in page["PriceList"]
                         if json.loads(text)["product"]["attributes"]["instanceFamily"]
                         == "GPU instance"]
    assert page["PriceList"]
    stubs.pricing_stub.add_response("get_products", page, GPU_ONLY_REQUEST)
    prices, dropped = SOURCE.on_demand_prices(stubs.pricing, {"p4d.24xlarge", "p5.48xlarge"})
    assert sorted(prices) == [("us-east-1", "p5.48xlarge"), ("us-west-2", "p4d.24xlarge")]
    assert dropped == {}


def test_a_non_gpu_row_in_the_answer_is_still_ignored(stubs: Stubs) -> None:
    # An emulator (or an API change) that ignores the filter: a compute-optimised row that passes
    # every other filter, and a row that says "GPU instance" for a type EC2 gives no GPU.
    page = fixture("aws_get_products_page2.json")
    p5 = json.loads(page["PriceList"][0])
    assert p5["product"]["attributes"]["instanceType"] == "p5.48xlarge"
    page["PriceList"] = [
        page["PriceList"][0],
        _item_with(p5, instanceType="c7i.48xlarge", instanceFamily="Compute optimized"),
        _item_with(p5, instanceType="inf2.48xlarge"),
    ]
    stubs.pricing_stub.add_response("get_products", page, GPU_ONLY_REQUEST)
    prices, dropped = SOURCE.on_demand_prices(stubs.pricing, {"p4d.24xlarge", "p5.48xlarge"})
    assert list(prices) == [("us-east-1", "p5.48xlarge")]
    assert dropped == {"instanceFamily != GPU instance": 1, "not a GPU instance": 1}
