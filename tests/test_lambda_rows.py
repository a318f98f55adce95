"""What the Lambda benchmark rows measured, as the fit reads them: Lambda's v1 and v2 "fp16"
Tacotron2 and WaveGlow runs trained in fp32 (the configs' --amp-run is not the training script's
flag, and the script drops flags it does not know), so they are left out of the fit and the
bench; v0's, which did train in fp16, stay."""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from gpucost.catalog import get_gpu

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fitc() -> Any:
    sys.path.insert(0, str(REPO / "scripts"))
    import fit_calibration

    return fit_calibration


def test_runs_that_ignored_their_amp_flag_are_left_out(tmp_path: Path, fitc: Any) -> None:
    table = tmp_path / "lambda.csv"
    header = "model_key,precision,gpu,num_gpus,batch_size,throughput,source_path,bench_version"
    rows = [("waveglow", "fp16", "v1", 60.0), ("waveglow", "fp32", "v1", 59.0),
            ("waveglow", "fp16", "v0", 110.0), ("tacotron2", "fp16", "v2", 150.0),
            ("resnet50", "fp16", "v1", 900.0)]
    table.write_text(header + "\n" + "".join(
        f"{model},{precision},V100 SXM2 16GB,1,32,{rate},results/x.txt,{version}\n"
        for model, precision, version, rate in rows))
    obs, _ = fitc.load_lambda(table, get_gpu)
    assert sorted((o.version, o.model, o.precision) for o in obs) == [
        ("v0", "waveglow", "fp16"), ("v1", "resnet50", "fp16"), ("v1", "waveglow", "tf32")]


def test_the_left_out_rows_ran_at_fp32_speed(shared_data: Path) -> None:
    """On a V100 (no TF32: fp32 is fp32) the v1 "fp16" rows run at the fp32 rows' speed, where
    v0's run 1.5x and more faster: tensor cores were never used."""
    import csv

    rates: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    with (shared_data / "benchmarks" / "lambda_throughput_families.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["num_gpus"] == "1" and row["gpu"].startswith("V100 SXM2 16GB"):
                rates[(row["bench_version"], row["model_key"], row["precision"])].append(
                    float(row["throughput"]))

    def gain(version: str, model: str) -> float:
        return (statistics.median(rates[(version, model, "fp16")])
                / statistics.median(rates[(version, model, "fp32")]))

    for model in ("tacotron2", "waveglow"):
        assert 0.95 < gain("v1", model) < 1.05
        assert gain("v0", model) > 1.4
