"""Inter-node fabric per offer (fabrics.csv): published specs, resolution, and the sync model."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from gpucost.catalog import get_gpu
from gpucost.errors import InputError
from gpucost.model import translate
from gpucost.model.fabrics import (
    CSV_PATH,
    FabricFileError,
    fabric_for,
    read_rules,
    resolve_fabrics,
    rules,
)
from gpucost.model.perf import predict
from gpucost.model.scaling import resolve_links
from gpucost.planning.ranking import rank
from gpucost.planning.request import Job, Request, make_filters
from gpucost.pricing.snapshot import Offers, Snapshot, load_snapshots, merge_offers
from gpucost.profile import resolve_profile


@pytest.mark.parametrize(("provider", "instance_type", "name", "transport", "gbps"), [
    ("aws", "p3dn.24xlarge", "EFA", "rdma", 100),
    ("aws", "p3.16xlarge", "Ethernet (ENA)", "tcp", 25),
    ("aws", "p4d.24xlarge", "EFA", "rdma", 400),
    ("aws", "p4de.24xlarge", "EFA", "rdma", 400),
    ("aws", "p5.48xlarge", "EFA v2", "rdma", 3200),
    ("aws", "p5en.48xlarge", "EFA v3", "rdma", 3200),
    ("aws", "g5.48xlarge", "EFA", "rdma", 100),
    ("aws", "g6.12xlarge", "EFA", "rdma", 40),
    ("gcp", "a2-highgpu-8g", "Ethernet (gVNIC)", "tcp", 100),
    ("gcp", "a3-highgpu-8g", "GPUDirect-TCPX", "rdma", 800),
    ("gcp", "a3-megagpu-8g", "GPUDirect-TCPXO", "rdma", 1600),
    ("gcp", "a3-ultragpu-8g", "GPUDirect RDMA (RoCE)", "rdma", 3200),
    ("azure", "Standard_ND96asr_v4", "InfiniBand HDR", "rdma", 1600),
    ("azure", "Standard_ND96isr_H100_v5", "InfiniBand NDR", "rdma", 3200),
    ("nebius", "gpu-h100-sxm_8gpu-128vcpu-1600gb", "InfiniBand NDR", "rdma", 3200),
])
def test_published_fabrics(provider: str, instance_type: str, name: str, transport: str,
                           gbps: float) -> None:
    fabric = fabric_for(provider, instance_type, None)
    assert (fabric.name, fabric.transport, fabric.gbps) == (name, transport, gbps)
    assert not fabric.assumed and fabric.source
    assert fabric.describe() == f"{name} {gbps:g} Gbit/s ({transport})"


def test_marketplaces_are_unknown_with_the_default_stated() -> None:
    default = translate.calibration().scaling.default_network_gbps
    for provider, instance_type in (("vast", "1x-RTX_4090-32-65536"),
                                    ("runpod", "8x_H100-SXM_SECURE"),
                                    ("shadeform", "crusoe_A100-80G-sxm4x8"),
                                    ("newcloud", "anything")):
        fabric = fabric_for(provider, instance_type, None)
        assert fabric.name == "unknown" and fabric.transport == "tcp"
        assert fabric.gbps == default
        assert f"the default {default:g} Gbit/s" in fabric.describe()
        assert "no published fabric" in fabric.describe()
    # a marketplace offer that states its link (Vast's inet speed) is taken at its word
    assert fabric_for("vast", "x", 0.8).gbps == 0.8
    # a cloud type without EFA runs TCP at the instance's stated bandwidth
    plain = fabric_for("aws", "g4dn.xlarge", 25.0)
    assert (plain.transport, plain.gbps, plain.assumed) == ("tcp", 25.0, "")
    assert fabric_for("aws", "g4dn.xlarge", float("nan")).gbps == default


def test_every_rule_has_a_source_and_each_provider_a_catch_all() -> None:
    table = rules()
    assert len(table) >= 50
    providers = {r.provider for r in table}
    assert {"aws", "gcp", "azure", "lambda", "vast", "runpod"} <= providers
    for provider in providers:
        mine = [r for r in table if r.provider == provider]
        assert mine[-1].instance_type == "*", provider  # exact rules first, then the rest
        assert all(r.source and r.confidence in ("high", "medium", "low") for r in mine)


def test_malformed_fabric_file_is_rejected(tmp_path: Path) -> None:
    header = CSV_PATH.read_text(encoding="utf-8").splitlines()[0]
    for bad in ('aws,p4d.24xlarge,EFA,infiniband,400,"src",high',
                'aws,p4d.24xlarge,EFA,rdma,-5,"src",high',
                'aws,p4d.24xlarge,EFA,rdma,400,,high'):
        path = tmp_path / "fabrics.csv"
        path.write_text(f"{header}\n{bad}\n", encoding="utf-8")
        with pytest.raises(FabricFileError):
            read_rules(path)


def test_vectorised_resolution_matches_one_by_one() -> None:
    offers = merge_offers(load_snapshots())
    fabrics = resolve_fabrics(offers["provider"], offers["instance_type"], offers["network_gbps"])
    assert len(fabrics.gbps) == len(offers) > 1000
    for i in range(0, len(offers), 37):
        one = fabric_for(str(offers["provider"][i]), str(offers["instance_type"][i]),
                         float(offers["network_gbps"][i]))
        assert (fabrics.gbps[i], fabrics.transport[i], fabrics.description[i]) == (
            one.gbps, one.transport, one.describe())
    empty = resolve_fabrics(np.array([], dtype=str), np.array([], dtype=str), np.array([]))
    assert len(empty.gbps) == len(empty.transport) == len(empty.description) == 0


def test_tcp_sockets_sync_slower_than_rdma_at_the_same_line_rate() -> None:
    cal = translate.calibration().scaling
    spec = get_gpu("A100 SXM4 40GB")
    rdma = resolve_links(spec, cal, intra_node_gbps=None, inter_node_gbps=100.0,
                         intra_node_link=None, inter_node_transport="rdma")
    tcp = resolve_links(spec, cal, intra_node_gbps=None, inter_node_gbps=100.0,
                        intra_node_link=None, inter_node_transport="tcp")
    assert tcp.inter_busbw_Bps == pytest.approx(
        rdma.inter_busbw_Bps * cal.tcp_busbw_efficiency / cal.network_busbw_efficiency)
    assert tcp.inter_latency_s > rdma.inter_latency_s
    assert tcp.intra_busbw_Bps == rdma.intra_busbw_Bps  # inside a node nothing changes
    profile = resolve_profile("bert-large-a100-fp16")
    kwargs = {"gpu": "A100 SXM4 40GB", "gpus_per_node": 8, "nodes": 4, "inter_node_gbps": 100.0}
    slow = predict(profile, **kwargs, inter_node_transport="tcp")  # type: ignore[arg-type]
    fast = predict(profile, **kwargs, inter_node_transport="rdma")  # type: ignore[arg-type]
    assert slow.throughput < fast.throughput
    # None keeps the behaviour from before fabrics were known (RDMA coefficients)
    assert predict(profile, **kwargs).throughput == fast.throughput  # type: ignore[arg-type]
    with pytest.raises(Exception, match="rdma or tcp"):
        predict(profile, **kwargs, inter_node_transport="carrier pigeon")  # type: ignore[arg-type]


def test_a_capped_tcp_stream_holds_sockets_to_the_cap_times_the_streams() -> None:
    # AWS caps one TCP stream between instances outside a cluster placement group at 5 Gbit/s;
    # NCCL opens one socket per connection unless it sees the ENA NIC (then 16). A 50 Gbit/s
    # g4dn pair: one stream moves 0.625 GB/s whatever the rating, 16 streams leave the NIC's
    # own TCP rate (50 Gbit/s x the socket efficiency) in charge.
    cal = translate.calibration().scaling
    spec = get_gpu("T4")
    common = {"intra_node_gbps": None, "inter_node_gbps": 50.0, "intra_node_link": None,
              "gpus_per_node": 4, "inter_node_transport": "tcp"}
    free = resolve_links(spec, cal, **common)  # type: ignore[arg-type]
    one = resolve_links(spec, cal, **common, tcp_stream_gbps=5.0)  # type: ignore[arg-type]
    many = resolve_links(spec, cal, **common, tcp_stream_gbps=5.0,  # type: ignore[arg-type]
                         tcp_streams=16)
    assert one.inter_busbw_Bps == pytest.approx(5e9 / 8)
    assert free.inter_busbw_Bps == pytest.approx(50e9 / 8 * cal.tcp_busbw_efficiency)
    assert many.inter_busbw_Bps == free.inter_busbw_Bps  # 80 Gbit/s of streams: the NIC binds
    assert one.intra_busbw_Bps == free.intra_busbw_Bps  # inside a node no stream crosses AWS
    profile = resolve_profile("bert-large-a100-fp16")
    group = {"gpu": "T4", "gpus_per_node": 4, "nodes": 2, "inter_node_gbps": 50.0,
             "inter_node_transport": "tcp"}
    capped = predict(profile, **group, tcp_stream_gbps=5.0)  # type: ignore[arg-type]
    uncapped = predict(profile, **group)  # type: ignore[arg-type]
    assert capped.step_time_s > uncapped.step_time_s
    assert capped.inter_busbw_gbs == pytest.approx(0.625)
    one_node = {**group, "nodes": 1}
    assert predict(profile, **one_node, tcp_stream_gbps=5.0  # type: ignore[arg-type]
                   ).step_time_s == predict(profile, **one_node).step_time_s  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tcp_stream_gbps": 5.0, "inter_node_transport": "rdma"}, "transport is not tcp"),
    ({"tcp_stream_gbps": 0.0, "inter_node_transport": "tcp"}, "positive Gbit/s"),
    ({"tcp_stream_gbps": float("nan"), "inter_node_transport": "tcp"}, "positive Gbit/s"),
    ({"tcp_stream_gbps": 5.0, "tcp_streams": 0, "inter_node_transport": "tcp"},
     "positive integer"),
    ({"tcp_streams": 2.5, "inter_node_transport": "tcp"}, "positive integer"),
])
def test_a_stream_cap_that_cannot_hold_is_a_usage_error(kwargs: dict[str, object],
                                                         message: str) -> None:
    profile = resolve_profile("bert-large-a100-fp16")
    with pytest.raises(InputError, match=message):
        predict(profile, gpu="T4", gpus_per_node=4, nodes=2, **kwargs)  # type: ignore[arg-type]


def test_predict_names_the_stream_cap_that_sets_the_network(
        capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.cli import main

    group = ["predict", "--profile", "bert-large-a100-fp16", "--gpu", "T4", "-k", "4", "-n", "2",
             "--network-gbps", "50", "--tcp-stream-gbps", "5"]
    assert main([*group, "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["inter_busbw_gbs"] == pytest.approx(0.625)
    assert (one["tcp_stream_gbps"], one["tcp_streams"]) == (5.0, 1)
    assert main([*group, "--tcp-streams", "16", "--json"]) == 0
    sixteen = json.loads(capsys.readouterr().out)
    assert sixteen["step_time_s"] < one["step_time_s"]
    assert main(group) == 0
    assert "network 0.62 GB/s over tcp, 1 x 5 Gbit/s stream)" in capsys.readouterr().out
    assert main([*group, "--transport", "rdma"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "transport is not tcp" in err[0]


def _offer(provider: str, instance_type: str, network_gbps: float) -> dict[str, object]:
    return {"provider": provider, "region": "r", "instance_type": instance_type,
            "gpu": "A100 SXM4 40GB", "gpu_count": 8, "gpu_memory_gb": 40, "price_hr": 30.0,
            "intra_node_link": "nvlink", "network_gbps": network_gbps}


def test_ranking_uses_each_offers_fabric() -> None:
    """Same GPUs, price and stated bandwidth: the EFA instance scales better than a cloud whose
    fabric is not published (Cudo), and every multi-node plan names its fabric."""
    fetched = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    offers = Offers.from_records([_offer("aws", "p4d.24xlarge", 400.0),
                                  _offer("cudo", "8x-A100_SXM4", 400.0)])
    job = Job(samples=1e7, description="10M samples")
    ranking = rank(Request(resolve_profile("bert-large-a100-fp16"), job,
                           (Snapshot(source="t", fetched_at=fetched, offers=offers),),
                           make_filters(max_nodes=4), now=fetched))
    cols = ranking.plans
    by = {(str(p), int(n)): (float(t), str(f)) for p, n, t, f in zip(
        cols.provider, cols.nodes, cols.throughput, cols.inter_node_fabric, strict=True)}
    assert by[("aws", 1)][0] == pytest.approx(by[("cudo", 1)][0])
    assert by[("aws", 1)][1] == by[("cudo", 1)][1] == ""
    for n in (2, 3, 4):
        assert by[("aws", n)][0] > by[("cudo", n)][0]
        assert by[("aws", n)][1] == "EFA 400 Gbit/s (rdma)"
        assert by[("cudo", n)][1].startswith("unknown 400 Gbit/s (tcp); assumed")


def test_scale_names_the_offers_fabric(capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.cli import main

    assert main(["scale", "--gpu", "A100 SXM4 80GB", "-N", "2", "--format", "json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert points[0]["inter_node_fabric"] == ""  # one node crosses no network
    assert "Gbit/s (" in points[1]["inter_node_fabric"]
    # --network-gbps describes another network: the offer's fabric no longer applies
    args = ["scale", "--gpu", "H100", "-k", "8", "-N", "2", "--price-hr", "10"]
    assert main([*args, "--network-gbps", "3200", "--format", "json"]) == 0
    fast = json.loads(capsys.readouterr().out)["points"][1]["throughput"]
    assert main([*args, "--network-gbps", "25", "--format", "json"]) == 0
    slow = json.loads(capsys.readouterr().out)["points"][1]["throughput"]
    assert fast > slow


def test_shipped_tcp_coefficients_are_the_published_socket_runs() -> None:
    """4-6 of 12.5 GB/s, 14.7 of 32 and 22.5 of 32 Gbit/s: median 0.459 by hand; one socket
    ring step 38-46 us. RDMA reaches more, sooner."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import fit_calibration as fitc

    eff, latency, used = fitc.tcp_anchors()
    assert eff == pytest.approx(0.459, abs=5e-4) and latency == pytest.approx(42e-6)
    assert len(used) == 4 and all("github.com/NVIDIA" in u for u in used)
    shipped = translate.shipped_calibration().scaling
    assert shipped.tcp_busbw_efficiency == round(eff, 3)
    assert shipped.tcp_hop_latency_s == pytest.approx(latency)
    assert shipped.tcp_busbw_efficiency < shipped.network_busbw_efficiency
    assert shipped.tcp_hop_latency_s > shipped.network_hop_latency_s
