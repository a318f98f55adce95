"""The plan file: round trip, and clear rejection of missing or out-of-range fields."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from goldens import assert_golden as _golden

from gpucost.errors import PlanFileError
from gpucost.planfile import (
    EstimateSection,
    JobSection,
    OfferSection,
    Plan,
    SafetySection,
    WorkloadSection,
    load_plan,
    parse_plan,
    save_plan,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = REPO_ROOT / "examples" / "plan.toml"


def _plan() -> Plan:
    return Plan(
        job=JobSection(
            name="resnet50",
            command=["python", "train.py", "--epochs", "3"],
            epochs=3.0,
            dataset_size=1281167.0,
            data_gb=150.0,
            checkpoint_gb=0.2,
        ),
        offer=OfferSection(
            provider="aws",
            instance_type="p4d.24xlarge",
            gpu="A100 SXM4 40GB",
            gpu_count=8.0,
            nodes=2,
            price_hr=32.7726,
            region="us-east-1",
            price_source="skypilot-aws",
            price_date="2026-11-30",
        ),
        workload=WorkloadSection(
            throughput=9500.0, profile="resnet50-v100-amp", precision="amp", batch_size=256
        ),
        safety=SafetySection(timeout_hours=30.0, budget_cap_usd=900.0),
        estimate=EstimateSection(hours=11.3, cost_usd=750.0, compute_usd=740.0, setup_usd=10.0),
        created_at="2026-11-30T20:00:00Z",
    )


def _doc() -> dict[str, Any]:
    return tomllib.loads(_plan().to_toml())


def _rejects(doc: dict[str, Any], *patterns: str) -> str:
    with pytest.raises(PlanFileError) as info:
        parse_plan(tomli_w.dumps(doc), origin="p.toml")
    message = str(info.value)
    for pattern in patterns:
        assert re.search(pattern, message), message
    assert "\n" not in message
    return message


def test_round_trip_through_a_file(tmp_path: Path) -> None:
    plan = _plan()
    path = save_plan(plan, tmp_path / "sub" / "plan.toml")
    loaded = load_plan(path)
    assert loaded == plan
    assert loaded.total_samples == pytest.approx(3 * 1281167)
    assert loaded.total_gpus == 16
    assert loaded.workdir(path) == (tmp_path / "sub").resolve()
    assert [p.name for p in path.parent.iterdir()] == ["plan.toml"]  # no temp files left


def test_every_section_is_written() -> None:
    doc = _doc()
    for section in (
        "job",
        "offer",
        "workload",
        "safety",
        "checkpoint",
        "spot",
        "disk",
        "idle",
        "estimate",
        "assumptions",
    ):
        assert section in doc
    assert doc["schema"] == "gpucost-plan" and doc["schema_version"] == 1


def test_example_plan_loads() -> None:
    plan = load_plan(EXAMPLE)
    assert plan.offer.provider == "local"
    assert plan.job.entry_script == "train_tiny.py" and "train_tiny.py" in plan.job.command
    assert (plan.workdir(EXAMPLE) / "train_tiny.py").is_file()
    assert plan.estimate.cost_usd <= plan.safety.budget_cap_usd


@pytest.mark.parametrize(
    "section,key",
    [
        ("safety", "timeout_hours"),
        ("safety", "budget_cap_usd"),
        ("offer", "price_hr"),
        ("job", "command"),
        ("workload", "throughput"),
    ],
)
def test_missing_field_is_named_with_a_fix(section: str, key: str) -> None:
    doc = _doc()
    del doc[section][key]
    _rejects(doc, rf"p\.toml: \[{section}\] {key} is missing", rf"add `{key} = \.\.\.`")


def test_missing_section_is_named() -> None:
    doc = _doc()
    del doc["safety"]
    _rejects(doc, r"section \[safety\] is missing", "timeout_hours, budget_cap_usd")


@pytest.mark.parametrize(
    "section,key,value,expect",
    [
        ("offer", "nodes", 0, r"\[offer\] nodes = 0 is out of range \(must be >= 1\)"),
        ("offer", "gpu_count", -1.0, r"\[offer\] gpu_count = -1.0 is out of range \(must be > 0\)"),
        ("safety", "verify_margin_pct", 150.0, r"verify_margin_pct = 150.0 is out of range"),
        ("offer", "market", "preemptible", r"market = 'preemptible' is not one of on-demand, spot"),
        ("idle", "policy", "hibernate", r"policy = 'hibernate' is not one of stop, destroy"),
        ("disk", "size_gb", -5.0, r"\[disk\] size_gb = -5.0 is out of range"),
        ("offer", "nodes", "two", r"\[offer\] nodes must be an integer"),
        ("job", "spot", "yes", r"\[job\] spot must be true or false"),
    ],
)
def test_out_of_range_is_rejected(section: str, key: str, value: Any, expect: str) -> None:
    doc = _doc()
    doc[section][key] = value
    _rejects(doc, expect)


def test_misspelt_field_is_rejected_not_ignored() -> None:
    doc = _doc()
    doc["safety"]["budget_cap_ud"] = doc["safety"].pop("budget_cap_usd")
    _rejects(doc, r"unknown field\(s\) in \[safety\]: budget_cap_ud")


def test_estimate_terms_must_add_up() -> None:
    doc = _doc()
    doc["estimate"]["cost_usd"] = 500.0
    _rejects(doc, r"cost_usd = 500 but its terms add up to 750\.00")


def test_safety_limits_must_allow_the_estimate() -> None:
    doc = _doc()
    doc["safety"]["budget_cap_usd"] = 100.0
    _rejects(doc, r"budget_cap_usd = 100 is below the estimate's cost_usd = 750")
    doc = _doc()
    doc["safety"]["timeout_hours"] = 5.0
    _rejects(doc, r"timeout_hours = 5 is below the estimate's hours = 11\.3")


def test_job_needs_a_size() -> None:
    doc = _doc()
    del doc["job"]["epochs"]
    _rejects(doc, r"\[job\] has no job size")


def test_schema_and_syntax_errors(tmp_path: Path) -> None:
    doc = _doc()
    doc["schema_version"] = 3
    _rejects(doc, "newer than this gpucost understands", "upgrade gpucost")
    doc = _doc()
    doc["schema"] = "something-else"
    _rejects(doc, "expected 'gpucost-plan'")
    bad = tmp_path / "bad.toml"
    bad.write_text("[job\nname = 1\n")
    with pytest.raises(PlanFileError, match="is not valid TOML"):
        load_plan(bad)
    with pytest.raises(PlanFileError, match="does not exist"):
        load_plan(tmp_path / "missing.toml")


def test_constructing_an_invalid_plan_raises() -> None:
    with pytest.raises(PlanFileError, match=r"\[offer\] nodes = 0"):
        dataclasses.replace(_plan(), offer=dataclasses.replace(_plan().offer, nodes=0))




def test_plan_toml_format_is_stable() -> None:
    _golden("plan_file.toml", _plan().to_toml())


def test_explain_format_is_stable() -> None:
    from gpucost.cli.explain import explain_lines

    _golden("explain_plan.txt", "\n".join(explain_lines(_plan())) + "\n")
    _golden("explain_example_plan.txt", "\n".join(explain_lines(load_plan(EXAMPLE))) + "\n")


def _vast_doc(version: int = 2) -> dict[str, Any]:
    doc = _doc()
    doc["schema_version"] = version
    doc["offer"].update(provider="vast", instance_type="4x-RTX_4090-32-65536", gpu="RTX 4090",
                        gpu_count=4.0)
    doc["marketplace"] = {"gpu_count": 4, "max_price_hr": 2.0, "region": "DE",
                          "min_reliability": 0.95}
    return doc


def test_a_marketplace_search_round_trips_and_needs_version_2() -> None:
    plan = parse_plan(tomli_w.dumps(_vast_doc()), origin="p.toml")
    assert plan.marketplace is not None and plan.marketplace.region == "DE"
    again = tomllib.loads(plan.to_toml())
    assert again["schema_version"] == 2 and again["marketplace"]["max_price_hr"] == 2.0
    assert _doc()["schema_version"] == 1  # a plan without it stays readable by older gpucost
    _rejects(_vast_doc(version=1), r"\[marketplace\] needs schema_version = 2")


def test_a_marketplace_search_must_fit_the_offer() -> None:
    doc = _vast_doc()
    doc["offer"]["provider"] = "aws"
    _rejects(doc, r"\[marketplace\] is for runpod and vast plans, not 'aws'")
    doc = _vast_doc()
    doc["marketplace"]["gpu_count"] = 8
    _rejects(doc, r"gpu_count = 8 but \[offer\] gpu_count = 4")
    doc = _vast_doc()
    doc["marketplace"]["min_reliability"] = 1.5
    _rejects(doc, r"min_reliability = 1.5 is out of range")
    doc = _vast_doc()
    doc["marketplace"]["max_price"] = 1.0
    _rejects(doc, r"unknown field\(s\) in \[marketplace\]: max_price")
