"""Setup time per provider and instance family, from the sourced table; --setup-min overrides."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from price_table import tiny_offers, write_prices

from gpucost.cli import main
from gpucost.errors import InputError
from gpucost.model.economics import JobParams
from gpucost.model.setup_times import (
    MAX_SETUP_MINUTES,
    OVERRIDE_SOURCE,
    TABLE_PATH,
    rules,
    setup_minutes,
    setup_time,
)
from gpucost.planning.api import compare
from gpucost.pricing.snapshot import load_offers


def test_every_row_of_the_table_has_a_source_and_a_confidence() -> None:
    lines = [ln for ln in TABLE_PATH.read_text().splitlines() if ln and not ln.startswith("#")]
    rows = list(csv.DictReader(lines))
    assert rows and len(rules()) == len(rows)
    for row in rows:
        assert row["source"].strip() and row["confidence"] in {"high", "medium", "low"}
        assert 0 <= float(row["minutes"]) <= MAX_SETUP_MINUTES
    # the catch-all comes last, so every machine has a setup time and nothing after it is dead
    assert (rows[-1]["provider"], rows[-1]["instance"]) == ("*", "*")


def test_the_providers_of_the_embedded_snapshot_differ_where_their_start_differs() -> None:
    offers = load_offers()
    minutes, source = setup_minutes(offers["provider"], offers["instance_type"])
    assert np.all(minutes > 0) and all(source)
    by_provider = {
        p: set(minutes[offers["provider"] == p].tolist()) for p in ("aws", "lambda", "vast")
    }
    assert by_provider["lambda"] == {4.0, 12.0}  # 1-4 GPU vs 8-GPU instances
    assert by_provider["aws"] == {5.0, 10.0}  # small vs 8-GPU EFA (p4/p5/p6) instances
    assert setup_time("lambda", "gpu_8x_h100_sxm5").minutes == 12.0
    assert setup_time("aws", "p4d.24xlarge").minutes == 10.0
    assert setup_time("AWS", "g5.xlarge").minutes == 5.0
    assert "Hao et al. 2021" in setup_time("gcp", "a2-highgpu-8g").source
    assert setup_time("local").minutes == 0.0
    assert setup_time("nobody").source.startswith("6 min (low confidence): no published figure")


def test_override_replaces_every_row_but_your_own_machine() -> None:
    minutes, source = setup_minutes(
        np.array(["aws", "local", "vast"]), np.array(["p5.48xlarge", "local-cpu", "x"]),
        override=2.5,
    )
    assert minutes.tolist() == [2.5, 0.0, 2.5]
    assert source[0] == source[2] == OVERRIDE_SOURCE


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), 1e300, MAX_SETUP_MINUTES + 1])
def test_absurd_setup_minutes_are_refused(bad: float) -> None:
    with pytest.raises(InputError):
        JobParams(setup_minutes=bad)
    with pytest.raises(InputError):
        setup_time("aws", override=bad)


def test_a_short_job_is_not_dominated_by_a_flat_ten_minutes() -> None:
    # A 2-minute training on a 1-GPU Lambda machine: 4 min setup from the table, not 10.
    frame = compare(samples=833.42 * 120, provider="lambda", gpu_count=1, market="on-demand")
    one = frame[frame["instance_type"] == "gpu_1x_a10"].iloc[0]
    assert one["setup_minutes"] == 4.0 and "Lambda Cloud" in one["setup_source"]
    assert one["setup_hours"] * 60 == pytest.approx(4.0)
    assert one["total_hours"] * 60 < 2 * 60 / 10 + 10  # well under the old 10 + compute
    eight = compare(samples=1e6, provider="lambda", gpu_count=8)
    assert set(eight["setup_minutes"]) == {12.0}
    flat = compare(samples=833.42 * 120, provider="lambda", gpu_count=1, setup_minutes=10)
    assert set(flat["setup_minutes"]) == {10.0} and set(flat["setup_source"]) == {OVERRIDE_SOURCE}


def test_compare_cli_setup_min_overrides_and_refuses_absurd_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compare", "--provider", "aws", "-n", "3", "--setup-min", "1", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert {p["setup_minutes"] for p in plans} == {1.0}
    assert main(["compare", "--provider", "aws", "-n", "3", "--json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert all("Hao et al. 2021" in p["setup_source"] for p in plans)
    for bad in ("-1", "1e300", "nan"):
        assert main(["compare", "--setup-min", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "setup" in err and "Traceback" not in err


def _vast_snapshot(tmp_path: Path, **extra: float) -> Path:
    return write_prices(tmp_path, tiny_offers("vast_4090_x8", vast_4090_x8=extra), source="vast")


def test_breakeven_setup_comes_from_the_offers_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _vast_snapshot(tmp_path, storage_gb_month=0.2, ingress_gb=0.003)
    argv = ["breakeven", "--offer", "vast-8x4090", "--prices", str(path), "--disk-gb", "250",
            "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["setup_hours"] * 60 == pytest.approx(6.0)
    assert doc["assumptions"] == [f"setup {setup_time('vast').source}"]
    assert main([*argv, "--setup-min", "15"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["setup_hours"] == 0.25 and doc["assumptions"] == []


def test_scale_counts_setup_so_a_short_job_does_not_ask_for_many_nodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A job of about two minutes on one 8-GPU node: the machines take longer to come up than
    # the training, so more nodes cannot cut the time by a quarter (was: no knee up to 8).
    argv = ["scale", "--gpu", "A100", "-k", "8", "--price-hr", "30", "-N", "8",
            "--samples", "1e6", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    first = doc["points"][0]
    # the cheapest 8x A100 offer's provider sets the setup time, as in compare
    assert doc["setup_minutes"] > 0
    assert doc["setup_minutes"] == pytest.approx(first["setup_hours"] * 60.0)
    assert doc["setup_source"]
    compute = 1e6 / first["throughput"] / 3600.0
    assert first["job_hours"] == pytest.approx(compute + doc["setup_minutes"] / 60.0)
    # $30/h for compute and setup, plus the boot disk's storage
    assert first["job_usd"] == pytest.approx(30.0 * first["job_hours"], rel=1e-2)
    assert doc["knee_nodes"] == 1
    assert main([*argv, "--setup-min", "0"]) == 0
    no_setup = json.loads(capsys.readouterr().out)
    assert no_setup["setup_minutes"] == 0.0
    assert no_setup["knee_nodes"] is None or no_setup["knee_nodes"] > 1


def test_scale_setup_comes_from_the_offer_it_prices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scale", "--gpu", "A100 SXM4 40GB", "-N", "2", "--samples", "1e7",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    provider, instance = doc["price_source"].split()[:2]
    assert doc["setup_minutes"] == setup_time(provider, instance).minutes


def test_prices_show_rates_lists_the_setup_times_with_their_sources(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["prices", "show", "--rates", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["setup_times"]
    eight = next(r for r in rows if r["instance"] == "gpu_8x*")
    assert (eight["provider"], eight["minutes"]) == ("lambda", 12.0)
    assert rows[-1]["provider"] == "*" and all(r["source"] for r in rows)
    assert main(["prices", "show", "--rates"]) == 0
    assert "setup before training" in capsys.readouterr().out


def test_the_api_breakeven_takes_its_setup_from_the_table() -> None:
    from gpucost.model.economics import breakeven

    lam = breakeven(2.0, 100, 0.2, provider="lambda", instance_type="gpu_8x_h100_sxm5")
    assert lam.setup_hours * 60 == setup_time("lambda", "gpu_8x_h100_sxm5").minutes == 12.0
    assert breakeven(2.0, 100, 0.2).setup_hours * 60 == setup_time("").minutes
    assert breakeven(2.0, 100, 0.2, setup_minutes=15).setup_hours == 0.25
