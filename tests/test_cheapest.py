"""The cheapest-offer searches of the pricing core, on a four-row table."""

from __future__ import annotations

from typing import Any

from gpucost.pricing.cheapest import GpuHourOffer, cheapest_of_instance, cheapest_per_gpu_hour
from gpucost.pricing.snapshot import Offers


def _offer(provider: str, region: str, instance: str, count: float, price: float,
           spot: float = float("nan")) -> dict[str, Any]:
    return {"provider": provider, "region": region, "instance_type": instance, "gpu": "H100",
            "gpu_count": count, "price_hr": price, "spot_price_hr": spot, "source": "tiny",
            "fetched_at": "2026-11-30T00:00:00Z"}


OFFERS = Offers.from_records([
    _offer("aws", "us-east-1", "p5.48xlarge", 8, 98.32, spot=40.0),  # 12.29 per GPU-hour
    _offer("runpod", "any", "1x-H100", 1, 2.99),
    _offer("runpod", "any", "1x-H100", 1, 2.69),  # the same place again, cheaper
    _offer("lambda", "us-west-1", "gpu_8x_h100", 8, 23.92),  # 2.99 per GPU-hour
])


def test_per_gpu_hour_keeps_the_cheapest_of_each_place_in_price_order() -> None:
    found = cheapest_per_gpu_hour(OFFERS, "H100", limit=10)
    assert [(o.provider, o.usd_per_gpu_hr) for o in found] == [
        ("runpod", 2.69), ("lambda", 2.99), ("aws", 12.29)]
    assert found[2] == GpuHourOffer(
        provider="aws", region="us-east-1", instance_type="p5.48xlarge", zone="", gpu_count=8.0,
        price_hr=98.32, spot_price_hr=40.0, usd_per_gpu_hr=12.29, source="tiny",
        date="2026-11-30")
    assert found[0].spot_price_hr is None  # NaN in the table: no spot market


def test_per_gpu_hour_stops_at_the_limit_and_ties_keep_table_order() -> None:
    assert [o.instance_type for o in cheapest_per_gpu_hour(OFFERS, "H100", limit=2)] == [
        "1x-H100", "gpu_8x_h100"]
    tied = Offers.from_records([_offer("b", "r", "x", 1, 2.0), _offer("a", "r", "y", 2, 4.0)])
    assert [o.provider for o in cheapest_per_gpu_hour(tied, "H100", limit=2)] == ["b", "a"]
    assert cheapest_per_gpu_hour(OFFERS, "A100 SXM4 80GB", limit=5) == ()


def test_cheapest_of_an_instance_type_on_any_or_one_provider() -> None:
    assert cheapest_of_instance(OFFERS, "1x-H100") == 2
    assert cheapest_of_instance(OFFERS, "1x-H100", "runpod") == 2
    assert cheapest_of_instance(OFFERS, "1x-H100", "aws") is None
    assert cheapest_of_instance(OFFERS, "p4d.24xlarge") is None
