"""Money reads with enough digits to tell plans apart, rounded one way everywhere."""

from __future__ import annotations

import json
import math

import pytest

from gpucost.cli import main
from gpucost.format import amount, usd, usd_text


@pytest.mark.parametrize(("value", "table", "exact"), [
    (0.0143, "$0.0143", "$0.0143"),
    (0.01627, "$0.0163", "$0.0163"),
    (0.5477, "$0.548", "$0.548"),
    (0.69, "$0.69", "$0.69"),  # no zero past the cent that tells nothing
    (0.004, "$0.004", "$0.004"),
    (0.0000059, "$0.0000059", "$0.0000059"),  # a local run: never $0.00, never 5.9e-06
    (0.9996, "$1.00", "$1.00"),  # rounds up to a dollar: written as dollars
    (12.345678, "$12.35", "$12.35"),
    (1234.567, "$1,235", "$1,234.57"),
    (0.0, "$0.00", "$0.00"),
    (-0.0123, "-$0.0123", "-$0.0123"),
    (-150.2, "-$150", "-$150.20"),
])
def test_usd(value: float, table: str, exact: str) -> None:
    assert usd(value) == table
    assert usd(value, exact=True) == exact
    assert usd_text(value) == exact.replace("$", "") + " USD"


def test_nan_reads_a_dash() -> None:
    assert usd(math.nan) == usd(math.nan, exact=True) == amount(math.nan) == "-"


def test_small_jobs_read_apart_in_compare(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # A tenth of an epoch costs a few cents on every top plan: each row's $/job and $/h must
    # read as its own figure to within the rounding of three digits (they all read $0.01).
    argv = ["compare", "--epochs", "0.1", "-n", "8"]
    assert main([*argv, "--format", "json"]) == 0
    plans = json.loads(capsys.readouterr().out)["plans"]
    assert all(p["cost_usd"] < 0.1 for p in plans)
    monkeypatch.setenv("COLUMNS", "80")  # a narrow terminal cuts no money column
    assert main(argv) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.lstrip().startswith("$0")]
    assert len(rows) == len(plans)
    for cells, plan in zip(rows, plans, strict=True):
        assert float(cells[0][1:]) == pytest.approx(plan["cost_usd"], rel=0.005), cells
        per_hour = next(c for c in cells[1:] if c.startswith("$"))
        assert float(per_hour[1:]) == pytest.approx(plan["usd_per_hour_total"], rel=0.005)


def test_breakeven_states_the_rebuild_one_way(capsys: pytest.CaptureFixture[str]) -> None:
    # 6 min at $0.37/h is a $0.037 rebuild: the breakdown and the advice say the same figure
    assert main(["breakeven", "--running-hr", "0.37", "--gb-month", "0.1", "--disk-gb", "50",
                 "--setup-min", "6"]) == 0
    out = capsys.readouterr().out
    rebuild = next(line for line in out.splitlines() if line.startswith("rebuild:"))
    advice = next(line for line in out.splitlines() if line.startswith("advice:"))
    assert "$0.037 " in rebuild and "vs a $0.037 rebuild" in advice


def test_per_gb_prices_say_their_unit_in_json_and_csv(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    # AWS charges $0.09 per GB out: the key said egress_gb, which reads as 0.09 GB moved
    assert main(["compare", "--provider", "aws", "-n", "1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (plan,) = doc["plans"]
    assert plan["egress_usd_per_gb"] == 0.09 and plan["ingress_usd_per_gb"] == 0.0
    assert "egress_gb" not in plan and "ingress_gb" not in plan
    assert doc["units"]["egress_usd_per_gb"] == "USD per GB out"
    assert list(doc["units"]) == list(plan)  # the units name every key, in order
    assert main(["compare", "--provider", "aws", "-n", "1", "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert "egress_usd_per_gb" in header and "egress_gb" not in header
    assert main(["prices", "show", "--rates", "--format", "json"]) == 0
    aws = next(r for r in json.loads(capsys.readouterr().out)["rates"] if r["provider"] == "aws")
    assert aws["egress_usd_per_gb"] == 0.09 and "egress_gb" not in aws
