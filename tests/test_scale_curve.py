"""Which offer `gpucost scale` follows, decided in the planning core, on a four-row table."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest

from gpucost.errors import InputError
from gpucost.planning.request import Request, build_request
from gpucost.planning.scaling import (
    OVERRIDE_SOURCE,
    PRICE_GIVEN,
    cheapest_offer_curve,
    mixed_node_curve,
    slowest_member,
)
from gpucost.pricing.snapshot import Offers, Snapshot

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
PROFILE = "resnet50-v100-amp"


def _offer(provider: str, instance: str, gpu: str, count: int, price: float) -> dict[str, Any]:
    return {"provider": provider, "region": "us-east-1", "instance_type": instance, "gpu": gpu,
            "gpu_count": count, "price_hr": price, "intra_node_link": "pcie",
            "storage_gb_month": 0.08, "egress_gb": 0.09, "network_gbps": 100.0}


SNAPSHOT = Snapshot(source="tiny", fetched_at=NOW - dt.timedelta(days=1),
                    offers=Offers.from_records([
                        _offer("runpod", "1x_L4_SECURE", "L4", 1, 0.40),  # one node only
                        _offer("aws", "g6.xlarge", "L4", 1, 0.80),
                        _offer("aws", "g6.12xlarge", "L4", 4, 4.60),
                        _offer("aws", "g4dn.12xlarge", "T4", 4, 3.91),  # no 1x T4 offer
                    ]))


def _request(gpu: str, max_nodes: int, **kwargs: Any) -> Request:
    return build_request(PROFILE, samples=1e6, gpu=gpu, market="on-demand",
                         max_nodes=2 * max_nodes, cpu_arch="any", snapshots=[SNAPSHOT], now=NOW,
                         **kwargs)


def test_the_cheapest_offer_where_a_group_launches_and_the_one_passed_over() -> None:
    curve = cheapest_offer_curve(_request("L4", 4), "L4", max_nodes=4)
    first = curve.scaling.points[0].row
    assert (first.provider, first.instance_type, first.gpu_count) == ("aws", "g6.xlarge", 1)
    assert [p.nodes for p in curve.scaling.points] == [1, 2, 3, 4]
    assert curve.price_source == "aws g6.xlarge (us-east-1), prices of 2026-11-30"
    (note,) = curve.notes
    assert note.startswith("offers on runpod left out") and "--price-hr 0.4" in note
    one = cheapest_offer_curve(_request("L4", 1), "L4", max_nodes=1)  # one node: runpod's
    assert one.scaling.points[0].row.provider == "runpod" and one.notes == ()


def test_gpus_per_node_default_to_the_fewest_an_offer_has() -> None:
    curve = cheapest_offer_curve(_request("T4", 2), "T4", max_nodes=2)
    assert curve.scaling.points[0].row.gpu_count == 4
    assert curve.notes == ("-k not given: no on-demand offer has 1 x T4 per node, so 4 per "
                           "node, the fewest one has (-k K to choose)",)
    given = cheapest_offer_curve(_request("L4", 2), "L4", max_nodes=2, gpus_per_node=4)
    assert given.scaling.points[0].row.instance_type == "g6.12xlarge"


def test_your_price_and_link_replace_the_offers_terms() -> None:
    curve = cheapest_offer_curve(_request("L4", 2), "L4", max_nodes=2, price_hr=0.5,
                                 link="nvlink")
    row = curve.scaling.points[0].row
    assert (curve.price_source, curve.notes) == (PRICE_GIVEN, ())  # no offer passed over
    assert (row.price_hr, row.instance_type, row.source) == (0.5, "g6.xlarge", OVERRIDE_SOURCE)
    (snapshot,) = curve.request.snapshots
    assert snapshot.offers["intra_node_link"][0] == "nvlink"
    assert snapshot.offers["storage_gb_month"][0] == 0.08  # the offer's own terms stay


def test_no_offer_of_the_gpu_needs_a_price() -> None:
    with pytest.raises(InputError, match="no on-demand offer for 1x A10G"):
        cheapest_offer_curve(_request("A10G", 2), "A10G", max_nodes=2, gpus_per_node=1)
    bare = cheapest_offer_curve(_request("A10G", 2), "A10G", max_nodes=2, gpus_per_node=1,
                                price_hr=1.0)
    row = bare.scaling.points[0].row
    assert (row.provider, row.instance_type, row.price_hr) == ("custom", "1x-A10G", 1.0)
    assert math.isnan(bare.request.snapshots[0].offers["storage_gb_month"][0])


def test_a_mixed_node_at_your_price() -> None:
    from gpucost.profile import resolve_profile

    node = ["A100 SXM4 80GB", "T4"]
    slowest = slowest_member(resolve_profile(PROFILE), node)
    assert slowest == "T4"
    curve = mixed_node_curve(_request(slowest, 2, gpu_count=2.0), node, max_nodes=2,
                             price_hr=3.0)
    row = curve.scaling.points[0].row
    assert curve.request.node_gpus == tuple(node) and curve.price_source == PRICE_GIVEN
    assert (row.instance_type, row.gpu, row.gpu_count, row.price_hr) == (
        "A100 SXM4 80GB+T4", "T4", 2, 3.0)
