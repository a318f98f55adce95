"""Defects found while using gpucost as a new user would (issue 14, item 9): one test each,
each failing before its fix."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from gpucost.cli import build_parser, main
from gpucost.pricing.rates import month_hours_for, rates_for
from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot

REPO_ROOT = Path(__file__).resolve().parents[1]
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def _snapshot(tmp_path: Path, row: dict[str, object], source: str = "vast") -> Path:
    return write_snapshot(
        Snapshot(source=source, fetched_at=dt.datetime.now(dt.UTC),
                 offers=Offers.from_records([row])),
        tmp_path,
    )


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


def test_fastest_within_budget_stays_within_it_at_worst() -> None:
    import numpy as np

    from gpucost.planning.advice import pick
    from gpucost.planning.api import plan

    # Spot plans only: the fastest by expected cost is a spot plan whose worst case
    # (interrupted at the worst moment, finished on-demand) can be over the budget.
    free = plan(epochs=10, market="spot")
    cols = free.ranking.plans
    hours, cost, worst = cols.total_hours, cols.cost_usd, cols.worst_usd
    fits = np.arange(len(cols))
    # A budget for which the fastest plan by expected cost (the old rule) is over the budget at
    # worst while another plan within it is not. Each set of plans within a budget is first
    # reached at one of the plans' own costs, where the budget is tightest: trying those is
    # exhaustive (a coarse grid missed the narrow ones).
    budget = None
    for b in np.unique(cost):
        within = fits[cost[fits] <= b]
        if len(within) and worst[pick(hours, cost, within)[1]] > b and (worst[within] <= b).any():
            budget = float(b)
            break
    assert budget is not None, "no budget separates expected and worst cost any more"
    advice = plan(epochs=10, budget_usd=budget, market="spot")
    assert advice.fastest is not None
    assert advice.fastest.row.worst_usd <= budget
    assert "even at worst" in advice.fastest.reasons[0]


def test_no_plan_safe_at_worst_is_not_called_safe() -> None:
    """Was: with no plan within the budget at worst, the fallback (the cheapest) was described
    as "within the budget even at worst" while its worst case was several times the budget."""
    import numpy as np

    from gpucost.planning.api import plan

    cols = plan(epochs=10, market="spot").ranking.plans
    order = np.argsort(cols.cost_usd)
    cheapest = int(order[0])
    # A budget that holds the cheapest plan's expected cost and no plan's worst case.
    budget = float(cols.cost_usd[cheapest])
    assert (cols.worst_usd > budget).all()
    advice = plan(epochs=10, budget_usd=budget, market="spot")
    assert advice.fastest is not None
    assert "even at worst" not in advice.fastest.reasons[0]
    assert "none stays within it at worst" in advice.fastest.reasons[0]


def _commands() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return set(sub.choices)  # type: ignore[attr-defined]


def test_every_command_named_in_a_message_exists() -> None:
    # Was: a missing profile pointed to `gpucost profiles`, which does not exist.
    commands = _commands()
    named = set()
    for path in (REPO_ROOT / "gpucost").rglob("*.py"):
        named |= {(path.name, m) for m in
                  re.findall(r"`gpucost ([a-z][a-z-]*)", path.read_text(encoding="utf-8"))}
    assert named, "the scan found no command names at all"
    unknown = sorted((f, c) for f, c in named if c not in commands)
    assert not unknown, f"messages name commands that do not exist: {unknown}"


def test_a_missing_profile_lists_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.profile import example_names

    assert main(["compare", "--profile", "missing.json"]) == 2
    err = capsys.readouterr().err
    assert "gpucost profiles" not in err and all(n in err for n in example_names())


def test_the_next_command_after_profiling_works_on_a_fresh_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: "next: gpucost compare --profile X", which fails on a profile with no job size.
    from gpucost.cli.profile import next_command
    from gpucost.profile import Profile

    fresh = Profile.from_measurement(gpu="T4", throughput=100.0, batch_size=32,
                                     precision="amp", param_count=1e7, name="fresh")
    path = fresh.save(tmp_path / "fresh.json")
    hint = next_command(fresh, path)
    assert main(["compare", "--profile", str(path)]) == 2  # no job size: a one-line error
    capsys.readouterr()
    assert "--samples N" in hint
    runnable = hint.split(",")[0].replace("N", "1e6").split()[1:]
    assert main(runnable) == 0


def test_one_day_old_prices_say_day(tmp_path: Path) -> None:
    from gpucost.preflight import run_preflight

    plan = Path(__file__).parent / "fixtures" / "preflight" / "good.toml"
    date = re.search(r'price_date = "([0-9-]+)"', plan.read_text(encoding="utf-8"))
    assert date is not None
    today = dt.date.fromisoformat(date.group(1)) + dt.timedelta(days=1)
    report = run_preflight(plan, today=today)
    messages = [r.message for r in report.results]
    assert any(" are 1 day old" in m for m in messages), messages
    assert not any("1 days" in m for m in messages)


def test_no_source_repeats_its_basis() -> None:
    # Was: "inferred: inferred: same CUDA line ..." in the CUDA-architecture check.
    from gpucost.preflight.arch import KNOWN_BUILDS

    for build in KNOWN_BUILDS.values():
        assert not build.source.startswith(f"{build.basis}:"), build.version


def test_explain_names_per_epoch_checkpoints(capsys: pytest.CaptureFixture[str]) -> None:
    # Was: "no periodic checkpoints" for a plan that checkpoints every epoch.
    assert main(["explain", str(REPO_ROOT / "examples" / "plan.toml")]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("checkpoints"))
    assert "every epoch" in line and "no periodic" not in line


def test_readme_step_profiler_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Was: the snippet left out model=, and saving the profile raised (no parameter count).
    torch = pytest.importorskip("torch")
    block = re.search(r"```python\n(from gpucost.profiler import StepProfiler\n.*?)```", README,
                      re.S)
    assert block is not None
    code = block.group(1).replace(
        "...;", "loss = model(batch).square().mean(); optimizer.zero_grad(); loss.backward();"
    )
    model = torch.nn.Linear(8, 4)
    namespace = {
        "model": model,
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01),
        "loader": [torch.randn(16, 8) for _ in range(12)],
    }
    monkeypatch.chdir(tmp_path)
    (tmp_path / "profiles").mkdir()
    exec(compile(code, "README.md", "exec"), namespace)
    saved = json.loads((tmp_path / "profiles" / "mine.json").read_text())
    assert saved["param_count"] == sum(p.numel() for p in model.parameters())


def test_readme_says_how_to_get_the_cpu_torch_wheel() -> None:
    # Was: `pip install torch==2.13.0` claimed to fetch the CPU wheel; PyPI serves CUDA builds.
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in README


def test_snapshot_readme_counts_match_the_snapshots() -> None:
    from gpucost.pricing.snapshot import load_snapshots

    text = (REPO_ROOT / "pricing_snapshots" / "README.md").read_text(encoding="utf-8")
    counts = {s.source: len(s.offers) for s in load_snapshots()}
    stated = {m.group(1): int(m.group(2).replace(",", ""))
              for m in re.finditer(r"^\| (skypilot-[a-z]+) \| ([\d,]+) \|", text, re.M)}
    assert stated, "the README states no per-source offer counts"
    assert stated == {k: counts[k] for k in stated}
    total = re.search(r"([\d,]+) offers in all", text)
    assert total is not None and int(total.group(1).replace(",", "")) == sum(counts.values())


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
