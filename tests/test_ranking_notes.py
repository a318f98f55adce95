"""What a ranking dropped or defaulted is said (#21): spot not searched by `plan`, a local
machine without a GPU left out, zones that repeat their region's prices folded, a
dataloader-bound profile's verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucost.cli import main


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # plans land here


def _plan(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> str:
    assert main(["plan", *args, "-o", str(out)]) == 0
    return capsys.readouterr().out


def test_plan_says_spot_was_not_searched_and_compare_does_not(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Was: compare ranks spot by default and plan does not, so one request priced $0.27 in one
    and $0.49 in the other with no line saying why."""
    out = _plan(capsys, Path("p.toml"), "--epochs", "1")
    assert "note: spot offers not searched" in out
    out = _plan(capsys, Path("s.toml"), "--epochs", "1", "--spot")
    assert "spot offers not searched" not in out
    assert main(["compare", "--epochs", "1", "--limit", "3"]) == 0
    assert "spot offers not searched" not in capsys.readouterr().out


def test_a_cpu_only_local_machine_left_out_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    """Was: --include-local on a machine without a GPU dropped its row with no note."""
    assert main(["compare", "--include-local", "--local-gpu", "CPU", "--limit", "3"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "your machine (--include-local) left out: it has no GPU" in out


def test_folded_zones_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.planning.ranking import rank
    from gpucost.planning.request import build_request

    ranking = rank(build_request(None))
    notes = [n for n in ranking.notes if "zones that repeat their region's prices" in n]
    assert len(notes) == 1
    plans = ranking.plans
    keys = list(zip(plans.provider, plans.region, plans.instance_type, plans.market,
                    plans.nodes, plans.price_hr, strict=True))
    assert len(keys) == len(set(keys))  # no two plans differ by their zone alone


def test_a_dataloader_bound_profile_is_planned_with_its_verdict_said(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Was: a dataloader-bound profile was planned on 2x H100 with no word of the verdict."""
    from gpucost.profile import Verdict, resolve_profile

    slow = resolve_profile("resnet50-v100-amp").with_changes(verdict=Verdict(
        kind="dataloader-bound", reason="62 % of the step waits for input",
        advice="raise DataLoader num_workers"))
    path = slow.save(Path("slow.json"))
    out = _plan(capsys, Path("p.toml"), "-p", str(path), "--epochs", "1")
    assert "is dataloader-bound (62 % of the step waits for input)" in " ".join(out.split())
    assert "raise DataLoader num_workers" in out

