"""What the READMEs show holds: the profiler snippet runs, the CPU torch wheel command is the
one that fetches it, the snapshot counts are the snapshots' (issue 14 item 9; each test failed
before its fix)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


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


def test_readme_planning_snippet_runs_and_writes_the_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = re.search(r"```python\n(import gpucost\n\nframe = .*?)```", README, re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), "README.md", "exec"), {})
    from gpucost import load_plan

    assert load_plan(tmp_path / "plan.toml").job.command == ["python", "train.py"]


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

