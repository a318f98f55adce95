"""Error bands (#23 item 1): every prediction carries the spread the held-out bench measured,
read from gpucost/model/error_bands.json (written by the bench), never hard-coded."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gpucost
from gpucost.catalog import get_gpu
from gpucost.model import bands
from gpucost.model.bands import band_for

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"

TABLE: dict[str, Any] = {
    "single_gpu": {
        "same-class|same": {"low": 0.9, "high": 1.1, "pairs": 50},
        "same-vendor|same": {"low": 0.8, "high": 1.3, "pairs": 90},
        "same-vendor|smaller": {"low": 0.7, "high": 1.5, "pairs": 40},
    },
    "multi_gpu": {"low": 0.5, "high": 1.0, "pairs": 30},
}


def test_a_band_is_looked_up_by_what_separates_source_and_target() -> None:
    a100_40, a100_80, v100 = (get_gpu(g) for g in ("A100 SXM4 40GB", "A100 SXM4 80GB", "V100"))
    same = band_for(a100_80, a100_80, 64, 64, 1, TABLE)
    assert (same.low, same.high) == (1.0, 1.0)  # the measurement itself
    assert (band_for(a100_40, a100_80, 64, 64, 1, TABLE).low,
            band_for(a100_40, a100_80, 64, 64, 1, TABLE).high) == (0.9, 1.1)
    other = band_for(v100, a100_80, 64, 32, 1, TABLE)
    assert (other.low, other.high) == (0.7, 1.5) and "smaller" in other.key
    # A key the bench never measured (a batch larger than measured) takes the widest band.
    wide = band_for(v100, a100_80, 64, 128, 1, TABLE)
    assert (wide.low, wide.high) == (0.7, 1.5) and "not measured" in wide.key
    # Several GPUs add the held-out clusters' spread.
    group = band_for(v100, a100_80, 64, 64, 8, TABLE)
    assert (group.low, group.high) == pytest.approx((0.8 * 0.5, 1.3 * 1.0))


@pytest.fixture
def ship_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Any], None]]:
    """Installs a band table as the shipped one (the package's file is left alone)."""
    def install(table: Any) -> None:
        path = tmp_path / "bands.json"
        path.write_text(json.dumps(table), encoding="utf-8")
        monkeypatch.setattr(bands, "BANDS_PATH", path)
        bands.shipped_bands.cache_clear()

    yield install
    bands.shipped_bands.cache_clear()


def _resnet50_v100(**measured: Any) -> gpucost.Profile:
    return gpucost.Profile.from_measurement(gpu="V100 SXM2 16GB", throughput=1200.0,
                                            precision="amp", param_count=25.6e6,
                                            name="resnet50", **measured)


def test_predict_reads_the_shipped_table(ship_table: Callable[[Any], None]) -> None:
    ship_table(TABLE)
    pred = gpucost.predict(_resnet50_v100(batch_size=256), gpu="H100 SXM5 80GB")
    assert (pred.band.low, pred.band.high) == (0.8, 1.3)


def test_compare_carries_cost_bands_and_says_when_the_top_plans_overlap() -> None:
    from gpucost.planning.ranking import rank
    from gpucost.planning.request import build_request

    ranking = rank(build_request(None))
    plans = ranking.plans
    assert np.all(plans.cost_low_usd <= plans.cost_usd + 1e-9)
    assert np.all(plans.cost_usd <= plans.cost_high_usd + 1e-9)
    assert np.any(plans.cost_high_usd > plans.cost_usd)
    top = int(np.argmin(plans.cost_usd))
    overlapping = int(np.count_nonzero(plans.cost_low_usd <= plans.cost_high_usd[top])) - 1
    notes = [n for n in ranking.notes if "cost band" in n]
    assert (len(notes) == 1) == (overlapping > 0)


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "benchmarks").is_dir(), reason="reference data not present")
def test_the_shipped_table_is_what_the_bench_measures() -> None:
    """The committed table is the bench's output for the model as it is: rerun
    `python bench/prediction_accuracy.py --write-bands` after a change to the model."""
    sys.path.insert(0, str(REPO / "bench"))
    sys.path.insert(0, str(REPO / "scripts"))
    import prediction_accuracy as bench

    samples: dict[str, list[float]] = {}
    bench.single_gpu_workload_out(DATA, samples)
    bench.sia_batch_shape(DATA, samples)
    clusters = bench.held_out_clusters(DATA)
    links: dict[str, list[float]] = {}
    bench.one_node(DATA, links)
    table = bench.band_table(samples, clusters[bench.RATIOS], links, DATA)
    shipped = bands.shipped_bands()
    for part in ("single_gpu", "one_node"):
        assert table[part].keys() == shipped[part].keys()
        for key, entry in table[part].items():
            assert entry == pytest.approx(shipped[part][key], abs=1e-3), key
    assert table["multi_gpu"] == pytest.approx(shipped["multi_gpu"], abs=1e-3)


def test_the_measured_gpu_at_another_batch_reads_its_own_rows() -> None:
    """A batch move on the measured GPU reads the rows the bench measured for it (one measured
    batch, or a measured line), and a table without them the same class's (as before they
    existed)."""
    v100 = get_gpu("V100")
    table: dict[str, Any] = {
        "single_gpu": {
            **TABLE["single_gpu"],
            "same-class|smaller": {"low": 0.85, "high": 1.2, "pairs": 70},
            "same-gpu|smaller": {"low": 0.5, "high": 1.1, "pairs": 60},
            "same-gpu|larger": {"low": 0.95, "high": 1.4, "pairs": 58},
            "same-gpu-line|larger": {"low": 0.6, "high": 1.2, "pairs": 46},
        },
        "multi_gpu": TABLE["multi_gpu"],
    }
    smaller = band_for(v100, v100, 64, 16, 1, table)
    assert (smaller.low, smaller.high) == (0.5, 1.1) and smaller.key.startswith("same-gpu,")
    larger = band_for(v100, v100, 64, 256, 1, table)
    assert (larger.low, larger.high) == (0.95, 1.4)
    line = band_for(v100, v100, 64, 256, 1, table, measured_batches=2)
    assert (line.low, line.high) == (0.6, 1.2) and line.key.startswith("same-gpu-line,")
    # No measured-line row for smaller batches: the one-measurement row answers.
    assert band_for(v100, v100, 64, 16, 1, table, measured_batches=2).low == 0.5
    # A table without the measured GPU's rows reads the same class's, and without those too
    # the widest band.
    classes = {"single_gpu": {k: v for k, v in table["single_gpu"].items()
                              if not k.startswith("same-gpu")}, "multi_gpu": TABLE["multi_gpu"]}
    same_class = band_for(v100, v100, 64, 16, 1, classes)
    assert (same_class.low, same_class.high) == (0.85, 1.2)
    assert same_class.key.startswith("same-class,")
    old = band_for(v100, v100, 64, 16, 1, TABLE)
    assert (old.low, old.high) == (0.7, 1.5) and "not measured" in old.key


def test_predict_passes_its_measured_batches_to_the_band(
        ship_table: Callable[[Any], None]) -> None:
    ship_table({"single_gpu": {"same-gpu|larger": {"low": 0.9, "high": 1.4, "pairs": 50},
                               "same-gpu-line|larger": {"low": 0.7, "high": 1.1, "pairs": 40}},
                "multi_gpu": TABLE["multi_gpu"]})
    one = _resnet50_v100(batch_size=64)
    two = _resnet50_v100(batch_size=64, other_batches={32: 1000.0})
    assert gpucost.predict(one, batch_size=128).band.high == 1.4
    assert gpucost.predict(two, batch_size=128).band.high == 1.1


def test_a_group_in_one_machine_reads_its_links_band() -> None:
    """Several GPUs in one node over NVLink or PCIe take the spread of Lambda's held-out
    one-machine runs over that link; across nodes, over pods' sockets, or where the table has no
    row for the link, the held-out clusters'."""
    v100, a100 = get_gpu("V100"), get_gpu("A100 SXM4 80GB")
    table = {**TABLE, "one_node": {"nvlink": {"low": 0.9, "high": 1.05, "pairs": 40},
                                   "pcie": {"low": 0.7, "high": 1.02, "pairs": 60}}}
    nvlink = band_for(v100, a100, 64, 64, 8, table, nodes=1, link="nvlink")
    assert (nvlink.low, nvlink.high) == pytest.approx((0.8 * 0.9, 1.3 * 1.05))
    assert "one node over nvlink (40 held-out runs)" in nvlink.key
    pcie = band_for(a100, a100, 64, 64, 4, table, nodes=1, link="pcie")
    assert (pcie.low, pcie.high) == (0.7, 1.02)
    for nodes, link in ((2, "nvlink"), (1, "socket")):
        group = band_for(v100, a100, 64, 64, 8, table, nodes=nodes, link=link)
        assert (group.low, group.high) == pytest.approx((0.8 * 0.5, 1.3 * 1.0))
        assert "held-out clusters" in group.key
    without = band_for(v100, a100, 64, 64, 8, TABLE, nodes=1, link="nvlink")
    assert "held-out clusters" in without.key


def test_predict_gives_its_nodes_and_link_to_the_band(ship_table: Callable[[Any], None]) -> None:
    ship_table({**TABLE, "one_node": {"nvlink": {"low": 0.9, "high": 1.05, "pairs": 40}}})
    profile = _resnet50_v100(batch_size=256)
    one = gpucost.predict(profile, gpu="A100 SXM4 80GB", gpus_per_node=8)
    assert one.intra_node_link == "nvlink" and one.band.high == pytest.approx(1.3 * 1.05)
    two = gpucost.predict(profile, gpu="A100 SXM4 80GB", gpus_per_node=8, nodes=2)
    assert two.band.high == pytest.approx(1.3 * 1.0)
    pods = gpucost.predict(profile, gpu="A100 SXM4 80GB", gpus_per_node=8,
                           intra_node_link="socket")
    assert "held-out clusters" in pods.band.key
