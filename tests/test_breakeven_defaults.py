"""Break-even's defaults, in the planning core: the offer first, then its provider's rates."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpucost.errors import InputError, NoOffersError
from gpucost.model.economics import DEFAULT_STORAGE_USD_GB_MONTH
from gpucost.planning.breakeven import (
    GivenFigures,
    OfferTerms,
    breakeven_defaults,
    machine_breakeven,
    offer_terms,
)
from gpucost.pricing.rates import month_hours_for, rates_for
from gpucost.pricing.snapshot import Offers

NAN = float("nan")


def _offer(provider: str, instance: str, price: float, **terms: float) -> dict[str, Any]:
    return {"provider": provider, "region": "r", "instance_type": instance, "gpu": "H100",
            "gpu_count": 1, "price_hr": price, **terms}


OFFERS = Offers.from_records([
    _offer("aws", "p5.4xlarge", 6.88, storage_gb_month=0.08),
    _offer("gcp", "a3-highgpu-1g", 11.06, storage_gb_month=0.10),
    _offer("vast", "1x-H100", 2.40, month_hours=720.0, ingress_gb=0.01),
    _offer("vast", "1x-H100", 1.90, month_hours=720.0),  # the cheaper one of the type
])


def test_offer_terms_are_the_cheapest_offer_of_the_type() -> None:
    terms = offer_terms(OFFERS, "1x-H100")
    assert (terms.provider, terms.price_hr, terms.month_hours) == ("vast", 1.90, 720.0)
    assert math.isnan(terms.storage_gb_month)  # the offer gives no disk price
    assert offer_terms(OFFERS, "p5.4xlarge", "aws").storage_gb_month == 0.08
    with pytest.raises(NoOffersError, match=r"'p5\.4xlarge' from gcp"):
        offer_terms(OFFERS, "p5.4xlarge", "gcp")


def test_the_offer_speaks_first_and_its_provider_fills_in() -> None:
    vast = breakeven_defaults("aws", offer_terms(OFFERS, "1x-H100"))  # the offer's provider wins
    assert (vast.provider, vast.running_hr, vast.month_hours) == ("vast", 1.90, 720.0)
    assert vast.ingress_per_gb == 0.0  # the snapshot column's default: inbound is free
    # Vast states disk prices per offer only, and this offer states none: assumed, and said
    assert vast.gb_month == DEFAULT_STORAGE_USD_GB_MONTH and vast.gb_month_note
    aws = breakeven_defaults("aws", None)
    assert aws.running_hr is None and aws.month_hours == month_hours_for("aws")
    aws_rates = rates_for("aws")
    assert aws_rates is not None and aws.gb_month == aws_rates.stopped_gb_month
    unknown = breakeven_defaults("", None)
    assert unknown.gb_month is None and unknown.ingress_note is None


def test_given_figures_win_and_the_defaults_used_are_said() -> None:
    offer = OfferTerms(provider="nosuch", instance_type="x", price_hr=2.0, storage_gb_month=NAN,
                       month_hours=NAN, ingress_gb=NAN)
    defaults = breakeven_defaults("nosuch", offer)
    result, assumed = machine_breakeven(defaults, GivenFigures(), disk_gb=100)
    assert result.running_usd_hr == 2.0
    assert result.storage_usd_gb_month == DEFAULT_STORAGE_USD_GB_MONTH
    assert [a.split(" ")[0] for a in assumed] == ["disk", "inbound", "setup"]
    given = GivenFigures(running_hr=3.0, gb_month=0.2, month_hours=720.0, ingress_per_gb=0.01,
                         setup_min=15.0)
    result, assumed = machine_breakeven(defaults, given, disk_gb=250, ingress_gb=43)
    assert (result.running_usd_hr, result.storage_usd_gb_month, result.month_hours,
            result.ingress_usd_gb, result.setup_hours) == (3.0, 0.2, 720.0, 0.01, 0.25)
    assert assumed == ()


def test_a_missing_price_says_which_option_gives_it() -> None:
    with pytest.raises(InputError, match="running price is missing"):
        machine_breakeven(breakeven_defaults("", None), GivenFigures(), disk_gb=1)
    with pytest.raises(InputError, match="disk price is missing") as err:
        machine_breakeven(breakeven_defaults("", None), GivenFigures(running_hr=1.0), disk_gb=1)
    assert "--provider NAME or --offer" in (err.value.hint or "")
