"""One plan, one answer (#21): what `gpucost plan` writes, `gpucost preflight`, `gpucost explain`
and the executor read the same way: the memory plan the planner re-planned the batch to, the
spot run's restart rule, and the budget cap the user gave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpucost.cli import main
from gpucost.planfile import load_plan

TODAY = "2026-11-30"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # plans and reports land here; no train.py to check


def _plan(capsys: pytest.CaptureFixture[str], out: Path, *args: str) -> str:
    assert main(["plan", *args, "-o", str(out)]) == 0
    return capsys.readouterr().out


def _preflight(capsys: pytest.CaptureFixture[str], plan: Path) -> tuple[int, dict[str, Any]]:
    code = main(["preflight", str(plan), "--today", TODAY, "--format", "json"])
    return code, {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}


# -- the memory plan ---------------------------------------------------------------------------


def test_preflight_checks_the_micro_batch_the_plan_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # BERT-large's batch 112 does not fit a 16 GB T4: plan re-plans it to micro-batch 38 x 3,
    # and preflight must check that, not the batch as profiled (it said "use micro-batch 38 x
    # 3" of a plan that held it, and exited 1).
    out = tmp_path / "t4.toml"
    _plan(capsys, out, "-p", "bert-large-a100-fp16", "--gpu", "T4", "--provider", "aws")
    workload = load_plan(out).workload
    assert workload.micro_batch is not None and workload.micro_batch < workload.batch_size
    assert workload.grad_accum_steps > 1
    code, checks = _preflight(capsys, out)
    assert checks["memory-fit"]["status"] == "pass", checks["memory-fit"]
    assert checks["memory-fit"]["details"]["peak_gb"] <= checks["memory-fit"]["details"][
        "usable_gb"]
    assert code == 0


def test_a_plan_sharded_by_the_planner_passes_and_unsharded_it_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 2.5 B parameters: 40 GB of Adam states, on 24 GB L4s only sharded (ZeRO-2/FSDP).
    from dataclasses import replace

    from gpucost.profile import resolve_profile

    big = replace(resolve_profile("bert-large-a100-fp16"), name="big", param_count=2.5e9,
                  param_bytes=None, grad_bytes=None, batch_size=1)
    big.save(tmp_path / "big.json")
    out = tmp_path / "sharded.toml"
    _plan(capsys, out, "-p", str(tmp_path / "big.json"), "--samples", "1e5", "--gpu", "L4",
          "--provider", "gcp")
    plan = load_plan(out)
    assert plan.workload.sharding in ("ZeRO-2", "FSDP"), plan.workload
    _, checks = _preflight(capsys, out)
    assert checks["memory-fit"]["status"] == "pass", checks["memory-fit"]
    # the same plan with its sharding taken away needs every state on every GPU
    text = out.read_text().replace(f'sharding = "{plan.workload.sharding}"', 'sharding = ""')
    (tmp_path / "unsharded.toml").write_text(text)
    _, checks = _preflight(capsys, tmp_path / "unsharded.toml")
    assert checks["memory-fit"]["status"] == "fail"
    assert "sharding = " in checks["memory-fit"]["fix"]  # the planner's own re-plan
