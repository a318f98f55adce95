"""AWS EC2 GPU instances: on-demand from the Price List API, spot from EC2, shapes from EC2.

* ``pricing.get_products`` (ServiceCode AmazonEC2) filtered to the one on-demand Linux rate an
  ordinary user pays: productFamily "Compute Instance", operatingSystem Linux, tenancy Shared,
  preInstalledSw NA, capacitystatus Used, licenseModel "No License required", marketoption
  OnDemand, and to the GPU families only: instanceFamily "GPU instance" (without it the answer
  holds every instance family's price, of which gpucost keeps only the GPU ones). Every
  filter is checked again on each item (the API and emulators differ), an item must also be a
  GPU type in ``describe_instance_types``, and only ``terms.OnDemand`` is read (Reserved terms
  are ignored). ``PriceList`` items are JSON strings;
  ``pricePerUnit.USD`` is a decimal string read with Decimal. Pages chain by ``NextToken``.
* EBS gp3 $/GB-month per region from the same API (productFamily Storage, volumeApiName gp3);
  regions without one take the rates table's figure.
* ``ec2.describe_instance_types`` gives GPU count, GPU memory (MiB -> GB) and vCPUs/RAM.
  Fractional GPUs (g6f: ``Count`` 0, ``GpuPartitionSize`` 0.125) count as that fraction.
* ``ec2.describe_spot_price_history`` per region with ``StartTime`` = now returns the current
  price per instance type and availability zone; an offer's spot price is the cheapest zone's.

Spot prices are not in the Price List. boto3 retries throttling itself (standard mode).

boto3 reads an answer whole before parsing it, so a hostile or broken endpoint could make it hold
any amount: every client :meth:`AwsSource.open_client` makes sends through :func:`bounded_send`,
which reads the answer in chunks under the same size cap and per-request deadline as the HTTP
sources (:mod:`gpucost.http`). Error messages carry at most a redacted snippet of what the
server said, never the whole body nor the request's signature or access key id.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from gpucost._optional import install_hint, installed, require
from gpucost.errors import CredentialsError, ProviderError
from gpucost.http import redact_text, snippet
from gpucost.limits import HTTP_READ_TIMEOUT_S, HTTP_REQUEST_DEADLINE_S, MAX_ANSWER_BYTES
from gpucost.pricing.rates import offer_rates
from gpucost.pricing.snapshot import Snapshot
from gpucost.pricing.sources.base import (
    PriceSource,
    build_snapshot,
    expect,
    gpu_link,
    now_utc,
    parsing,
    price,
    resolve_gpu,
)
from gpucost.providers.aws import PROVIDER

PRICING_REGION = "us-east-1"  # the Price List API answers from us-east-1 (and 2 others)
SHAPES_REGION = "us-east-1"
MIB_PER_GB = 1024.0
ON_DEMAND_FILTERS: dict[str, str] = {
    "productFamily": "Compute Instance",
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
    "marketoption": "OnDemand",
    # Server-side: only GPU families come back (Inferentia/Trainium are "Machine Learning ASIC
    # Instances", not GPUs). Listed last so that an item failing several filters is counted
    # under the more specific reason above.
    "instanceFamily": "GPU instance",
}
GP3_FILTERS: dict[str, str] = {"productFamily": "Storage", "volumeApiName": "gp3"}
LINUX_SPOT = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")
MAX_PAGES = 10_000
_CHUNK = 64 << 10  # bytes read at a time from an answer


class _Body:
    """An answer already read (under the cap), handed back to botocore as its raw stream."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self._data


def bounded_send(client: Any, *, source: str, max_bytes: int = MAX_ANSWER_BYTES,
                 deadline_s: float = HTTP_REQUEST_DEADLINE_S) -> None:
    """Make ``client`` (a boto3 client) read each answer in chunks, refusing one longer than
    ``max_bytes`` or slower than ``deadline_s`` before holding more of it (botocore's
    ``before-send`` hook: a response returned there is used instead of botocore's own send)."""
    AWSResponse = require("botocore.awsrequest", needed_for="AWS prices").AWSResponse

    session = client._endpoint.http_session  # botocore's own: same proxies, TLS and timeouts

    def send(request: Any, **_: Any) -> Any:
        deadline = time.monotonic() + deadline_s
        # Asked to stream, botocore's session leaves the body unread for the loop below.
        request.stream_output = True
        response = session.send(request)
        chunks: list[bytes] = []
        size = 0
        try:
            # read1: whatever has arrived, so a server dripping a byte at a time meets the
            # deadline below (read() would wait for a whole chunk, the read timeout never firing).
            while chunk := response.raw.read1(_CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise ProviderError(
                        f"{source}: {request.method} {request.url.split('?', 1)[0]} answered "
                        f"more than {max_bytes / 2**20:g} MiB; stopped reading it",
                        hint="no price API answers that much: the server or the URL is wrong")
                if time.monotonic() > deadline:
                    raise ProviderError(
                        f"{source}: {request.method} {request.url.split('?', 1)[0]} did not "
                        f"finish within its {deadline_s:g} s deadline",
                        hint="the server is stalled or far too slow; try again later")
                chunks.append(chunk)
        finally:
            response.raw.close()  # a refused answer's connection is dropped, not drained
        return AWSResponse(response.url, response.status_code, response.headers,
                           _Body(b"".join(chunks)))

    client.meta.events.register("before-send", send)


@dataclass
class AwsClients:
    """The boto3 clients the AWS source reads: one pricing client, EC2 clients per region."""

    pricing: Any
    ec2_for_region: Callable[[str], Any]
    regions: tuple[str, ...] | None = None  # None: every region the Price List prices
    _ec2: dict[str, Any] = field(default_factory=dict)

    def ec2(self, region: str) -> Any:
        if region not in self._ec2:
            self._ec2[region] = self.ec2_for_region(region)
        return self._ec2[region]


@dataclass(frozen=True)
class Shape:
    gpu_name: str
    gpu_count: float
    gpu_memory_gb: float
    vcpus: float
    ram_gb: float
    network_gbps: float


def _filters(values: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in values.items()]


def network_gbps(text: str) -> float:
    """"3200 Gigabit" -> 3200, "4x 100 Gigabit" -> 400; "Up to 25 Gigabit" -> NaN (burst only)."""
    match = re.fullmatch(r"\s*(?:(\d+)x\s*)?(\d+(?:\.\d+)?)\s*Gigabit\s*", text)
    if not match:
        return math.nan
    return float(match[1] or 1) * float(match[2])


@contextlib.contextmanager
def _aws_errors(source: str, what: str) -> Iterator[None]:
    botocore_errors = require("botocore.exceptions", needed_for="AWS prices")
    NoCredentialsError = botocore_errors.NoCredentialsError
    ClientError = botocore_errors.ClientError
    BotoCoreError = botocore_errors.BotoCoreError

    try:
        yield
    except NoCredentialsError:
        raise CredentialsError(f"{source}: no AWS credentials for {what}",
                               hint=SOURCE.credentials_hint) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        # The server's own words, cut and redacted: one that echoes the request would otherwise
        # print its Authorization header (the access key id) or a body of any size.
        code = _said(str(error.get("Code", "?")), 60)
        message = _said(str(error.get("Message", "")), 200)
        if code in ("AccessDeniedException", "UnauthorizedOperation", "AuthFailure",
                    "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken"):
            raise CredentialsError(f"{source}: {what} was refused ({code}: {message})",
                                   hint="the credentials need pricing:GetProducts, "
                                        "ec2:DescribeInstanceTypes, ec2:DescribeSpotPriceHistory"
                                   ) from None
        raise ProviderError(f"{source}: {what} failed ({code}: {message})") from None
    except BotoCoreError as exc:
        raise ProviderError(f"{source}: {what} failed ({type(exc).__name__}: "
                            f"{_said(str(exc), 200)})") from None


def _said(text: str, limit: int) -> str:
    """What an AWS answer or botocore said, on one line, cut to ``limit`` and with the request's
    credentials (signature, access key id, session token) removed."""
    return snippet(redact_text(text), limit)


class AwsSource(PriceSource[AwsClients], declared=PROVIDER):
    credentials_hint = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or run "
                        "`aws configure` (the standard AWS credential chain)")
    default_base_url = "https://api.pricing.us-east-1.amazonaws.com"
    ec2_url_env_var = "GPUCOST_AWS_EC2_URL"

    def unavailable(self) -> str | None:
        if not installed("boto3"):
            return f"boto3 is not installed: {install_hint('aws')}"
        return None

    def find_credentials(self, env: Mapping[str, str], home: Path) -> str | None:
        """Whether the standard AWS chain finds credentials (it reads the process environment)."""
        session = require("botocore.session", needed_for="AWS prices").Session()
        try:
            found = session.get_credentials()
        except Exception:  # a broken ~/.aws/config: treat as missing, boto3 says why later
            return None
        return "" if found is not None else None  # boto3 keeps the secret; we never hold it

    @contextlib.contextmanager
    def open_client(self, base_url: str, secret: str,
                    cancel: threading.Event | None = None) -> Iterator[AwsClients]:
        # boto3 has no cancel hook: a refresh stops waiting for it at the refresh deadline.
        boto3 = require("boto3", needed_for="AWS prices")
        Config = require("botocore.config", needed_for="AWS prices").Config

        config = Config(retries={"mode": "standard", "max_attempts": 5},
                        connect_timeout=HTTP_READ_TIMEOUT_S, read_timeout=HTTP_READ_TIMEOUT_S)
        pricing_url = None if base_url == self.default_base_url else base_url
        # One override (a replay server, a proxy) serves every AWS call unless EC2 has its own.
        ec2_url = os.environ.get(self.ec2_url_env_var) or pricing_url
        pricing = boto3.client("pricing", region_name=PRICING_REGION, endpoint_url=pricing_url,
                               config=config)
        bounded_send(pricing, source=self.name, max_bytes=MAX_ANSWER_BYTES,
                     deadline_s=HTTP_REQUEST_DEADLINE_S)

        def ec2(region: str) -> Any:
            client = boto3.client("ec2", region_name=region, endpoint_url=ec2_url, config=config)
            bounded_send(client, source=self.name, max_bytes=MAX_ANSWER_BYTES,
                         deadline_s=HTTP_REQUEST_DEADLINE_S)
            return client

        yield AwsClients(pricing=pricing, ec2_for_region=ec2)

    def fetch(self, client: AwsClients, *, now: dt.datetime | None = None) -> Snapshot:
        fetched_at = now_utc(now)
        shapes = self.instance_shapes(client.ec2(SHAPES_REGION))
        on_demand, dropped = self.on_demand_prices(client.pricing, set(shapes))
        gp3 = self.gp3_prices(client.pricing)
        regions = sorted({region for region, _ in on_demand})
        if client.regions is not None:
            regions = [r for r in regions if r in client.regions]
        rows = []
        for region in regions:
            types = sorted(t for r, t in on_demand if r == region)
            spot = self.spot_prices(client.ec2(region), types, fetched_at)
            rates = offer_rates(self.provider)
            if region in gp3:
                rates["storage_gb_month"] = gp3[region]
            for instance_type in types:
                shape = shapes[instance_type]
                gpu = resolve_gpu(shape.gpu_name, memory_gb=shape.gpu_memory_gb)
                if gpu is None:
                    dropped["GPU not in catalog"] = dropped.get("GPU not in catalog", 0) + 1
                    continue
                rows.append({
                    "provider": self.provider, "region": region, "instance_type": instance_type,
                    "gpu": gpu, "gpu_count": shape.gpu_count,
                    "gpu_memory_gb": shape.gpu_memory_gb, "vcpus": shape.vcpus,
                    "ram_gb": shape.ram_gb, "price_hr": on_demand[(region, instance_type)],
                    "spot_price_hr": spot.get(instance_type, math.nan), **rates,
                    "network_gbps": shape.network_gbps, "intra_node_link": gpu_link(gpu),
                })
        return build_snapshot(self, rows, fetched_at=fetched_at, provenance={
            "api": "pricing.get_products, ec2.describe_instance_types, "
                   "ec2.describe_spot_price_history",
            "filters": ON_DEMAND_FILTERS, "gpu_instance_types": len(shapes),
            "items_dropped": dropped, "regions": regions,
            "gp3_regions": len(gp3), "spot": "cheapest availability zone, latest price",
        })

    def instance_shapes(self, ec2: Any) -> dict[str, Shape]:
        """GPU instance type -> GPUs, vCPUs, RAM and network (describe_instance_types)."""
        shapes: dict[str, Shape] = {}
        token = None
        for _ in range(MAX_PAGES):
            kwargs: dict[str, Any] = {"MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            with _aws_errors(self.name, "ec2.describe_instance_types"):
                page = ec2.describe_instance_types(**kwargs)
            with parsing(self.name, "describe_instance_types answer"):
                for item in page["InstanceTypes"]:
                    info = item.get("GpuInfo")
                    if not info or not info.get("Gpus"):
                        continue
                    gpus = info["Gpus"][0]
                    count = float(gpus["Count"])
                    if count == 0:  # fractional: a partition of one GPU
                        count = float(gpus["GpuPartitionSize"])
                    shapes[item["InstanceType"]] = Shape(
                        gpu_name=str(gpus["Name"]), gpu_count=count,
                        gpu_memory_gb=gpus["MemoryInfo"]["SizeInMiB"] / MIB_PER_GB,
                        vcpus=float(item["VCpuInfo"]["DefaultVCpus"]),
                        ram_gb=item["MemoryInfo"]["SizeInMiB"] / MIB_PER_GB,
                        network_gbps=network_gbps(
                            str(item.get("NetworkInfo", {}).get("NetworkPerformance", ""))))
                token = page.get("NextToken")
            if not token:
                return shapes
        raise ProviderError(f"{self.name}: describe_instance_types paging did not end")

    def _products(self, pricing: Any, filters: Mapping[str, str]) -> Iterator[dict[str, Any]]:
        token = None
        for _ in range(MAX_PAGES):
            kwargs: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": _filters(filters),
                                      "FormatVersion": "aws_v1", "MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            with _aws_errors(self.name, "pricing.get_products"):
                page = pricing.get_products(**kwargs)
            with parsing(self.name, "get_products answer"):
                items = [json.loads(expect(text, str, "PriceList item"))
                         for text in page["PriceList"]]
                token = page.get("NextToken")
            yield from items
            if not token:
                return
        raise ProviderError(f"{self.name}: get_products paging did not end")

    def on_demand_prices(self, pricing: Any, gpu_types: set[str],
                         ) -> tuple[dict[tuple[str, str], float], dict[str, int]]:
        """(region, instance type) -> on-demand $/h, and items dropped per reason."""
        prices: dict[tuple[str, str], float] = {}
        dropped: dict[str, int] = {}
        for index, item in enumerate(self._products(pricing, ON_DEMAND_FILTERS)):
            with parsing(self.name, f"PriceList item {index}"):
                attributes = item["product"]["attributes"]
                mismatch = next((k for k, v in ON_DEMAND_FILTERS.items() if k != "productFamily"
                                 and attributes.get(k) != v), None)
                if item["product"].get("productFamily") != ON_DEMAND_FILTERS["productFamily"]:
                    mismatch = "productFamily"
                if mismatch:
                    dropped[f"{mismatch} != {ON_DEMAND_FILTERS[mismatch]}"] = \
                        dropped.get(f"{mismatch} != {ON_DEMAND_FILTERS[mismatch]}", 0) + 1
                    continue
                instance_type = str(attributes["instanceType"])
                if instance_type not in gpu_types:
                    dropped["not a GPU instance"] = dropped.get("not a GPU instance", 0) + 1
                    continue
                hourly = self._hourly(item)
                if hourly is None:
                    dropped["no hourly on-demand price"] = \
                        dropped.get("no hourly on-demand price", 0) + 1
                    continue
                prices[(str(attributes["regionCode"]), instance_type)] = hourly
        return prices, dropped

    @staticmethod
    def _hourly(item: Mapping[str, Any]) -> float | None:
        for term in expect(item["terms"].get("OnDemand", {}), dict, "terms.OnDemand").values():
            for dimension in term["priceDimensions"].values():
                if dimension["unit"] == "Hrs":
                    amount = Decimal(price(dimension["pricePerUnit"]["USD"], "pricePerUnit.USD"))
                    if amount > 0:
                        return float(amount)
        return None

    def gp3_prices(self, pricing: Any) -> dict[str, float]:
        """Region -> EBS gp3 $/GB-month."""
        out: dict[str, float] = {}
        for index, item in enumerate(self._products(pricing, GP3_FILTERS)):
            with parsing(self.name, f"gp3 PriceList item {index}"):
                attributes = item["product"]["attributes"]
                if attributes.get("volumeApiName") != "gp3":
                    continue
                for term in item["terms"].get("OnDemand", {}).values():
                    for dimension in term["priceDimensions"].values():
                        if dimension["unit"] == "GB-Mo":
                            out[str(attributes["regionCode"])] = price(
                                dimension["pricePerUnit"]["USD"], "gp3 pricePerUnit.USD")
        return out

    def spot_prices(self, ec2: Any, instance_types: list[str],
                    now: dt.datetime) -> dict[str, float]:
        """Instance type -> the cheapest zone's current Linux spot $/h in ``ec2``'s region."""
        latest: dict[tuple[str, str], tuple[dt.datetime, float]] = {}
        if not instance_types:
            return {}
        token = None
        for _ in range(MAX_PAGES):
            kwargs: dict[str, Any] = {"InstanceTypes": instance_types,
                                      "ProductDescriptions": ["Linux/UNIX"], "StartTime": now}
            if token:
                kwargs["NextToken"] = token
            with _aws_errors(self.name, "ec2.describe_spot_price_history"):
                page = ec2.describe_spot_price_history(**kwargs)
            with parsing(self.name, "describe_spot_price_history answer"):
                for row in page["SpotPriceHistory"]:
                    if row["ProductDescription"] not in LINUX_SPOT \
                            or row["InstanceType"] not in instance_types:
                        continue
                    stamp = row["Timestamp"]
                    if isinstance(stamp, str):
                        stamp = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                    key = (str(row["InstanceType"]), str(row["AvailabilityZone"]))
                    amount = price(row["SpotPrice"], "SpotPrice")
                    if key not in latest or stamp > latest[key][0]:
                        latest[key] = (stamp, amount)
                token = page.get("NextToken")
            if not token:
                break
        else:
            raise ProviderError(f"{self.name}: describe_spot_price_history paging did not end")
        cheapest: dict[str, float] = {}
        for (instance_type, _zone), (_, amount) in latest.items():
            if amount > 0:
                cheapest[instance_type] = min(amount, cheapest.get(instance_type, math.inf))
        return cheapest


SOURCE = AwsSource()
