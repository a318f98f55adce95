"""`gpucost breakeven` prices an offer as `compare` does: the month hours, disk and inbound
rates of the provider's rates table (defects found as a new user, issue 14 item 9; each test
failed before its fix)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from price_table import write_prices

from gpucost.cli import main
from gpucost.pricing.rates import month_hours_for, rates_for
from gpucost.pricing.snapshot import Offers


def _snapshot(tmp_path: Path, row: dict[str, object], source: str = "vast") -> Path:
    return write_prices(tmp_path, Offers.from_records([row]), source=source)


def test_breakeven_on_a_vast_offer_without_an_inbound_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: "ingress $/GB must be a number >= 0, got nan" unless --ingress-per-gb was given.
    path = _snapshot(tmp_path, {"provider": "vast", "region": "SE", "instance_type": "v-8x4090",
                                "gpu": "RTX 4090", "gpu_count": 8, "price_hr": 3.4828,
                                "storage_gb_month": 0.2, "month_hours": 720})
    assert main(["breakeven", "--offer", "v-8x4090", "--prices", str(path), "--disk-gb", "250",
                 "--ingress-gb", "43", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ingress_usd_gb"] == 0.0 and doc["month_hours"] == 720.0
    assert "inbound data free: no inbound price for vast" in doc["assumptions"]


def test_breakeven_on_an_offer_without_a_disk_price_prices_it_as_compare_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpucost.model.economics import DEFAULT_STORAGE_USD_GB_MONTH

    path = _snapshot(tmp_path, {"provider": "vast", "region": "SE", "instance_type": "v-1x",
                                "gpu": "RTX 4090", "gpu_count": 1, "price_hr": 0.4})
    assert main(["breakeven", "--offer", "v-1x", "--prices", str(path), "--disk-gb", "100",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["storage_usd_gb_month"] == DEFAULT_STORAGE_USD_GB_MONTH


@pytest.mark.parametrize("provider", ["runpod", "vast", "aws", "lambda"])
def test_breakeven_month_hours_come_from_the_rates_table(
    provider: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: RunPod 730 h in breakeven's own table, 720 h in the rates table snapshots use.
    assert main(["breakeven", "--provider", provider, "--running-hr", "1", "--disk-gb", "100",
                 "--gb-month", "0.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["month_hours"] == month_hours_for(provider)
    assert month_hours_for("runpod") == 720.0


def test_breakeven_stopped_runpod_disk_is_priced_at_the_stopped_rate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runpod = rates_for("runpod")
    assert runpod is not None
    assert main(["breakeven", "--provider", "runpod", "--running-hr", "1", "--disk-gb", "100",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["storage_usd_gb_month"] == runpod.stopped_gb_month


def test_breakeven_for_a_provider_without_rates_names_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Was: "the disk price is missing (give --gb-month USD or --provider NAME)" for --provider ibm.
    assert main(["breakeven", "--provider", "ibm", "--running-hr", "2", "--disk-gb", "100"]) == 2
    err = capsys.readouterr().err
    assert "provider 'ibm' has no disk price" in err and "--provider NAME" not in err
    assert err.count("\n") == 1
    assert main(["breakeven", "--provider", "ibm", "--running-hr", "2", "--disk-gb", "100",
                 "--gb-month", "0.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["month_hours"] == 730.0


def test_month_hours_have_one_home() -> None:
    # Was: RunPod billed on 730 h in breakeven and 720 h in the rates table; every price source
    # and the economics now agree with gpucost.pricing.rates (the providers' declarations).
    from gpucost import providers
    from gpucost.model import economics, interruptions
    from gpucost.pricing.rates import HYPERSCALER_MONTH_HOURS
    from gpucost.pricing.sources.registry import sources

    checked = 0
    for source in sources().values():
        if providers.find(source.provider) is not None:
            assert source.month_hours == month_hours_for(source.provider), source
            checked += 1
    assert checked >= 6  # aws, azure, gcp, lambda, runpod, vast
    assert economics.MONTH_HOURS_CLOUD == interruptions.MONTH_HOURS == HYPERSCALER_MONTH_HOURS

