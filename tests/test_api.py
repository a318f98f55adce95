"""The public API: what `import gpucost` offers, and what it costs to import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import gpucost
from gpucost.cli import main


def test_all_lists_exactly_the_lazy_exports() -> None:
    assert set(gpucost.__all__) == {"__version__", *gpucost._EXPORTS}


def test_every_export_resolves_to_a_callable_or_class() -> None:
    for name in gpucost._EXPORTS:
        assert callable(getattr(gpucost, name)), name


def test_submodules_do_not_shadow_the_functions_of_the_same_name() -> None:
    code = (
        "import gpucost.planning.api, gpucost.planfile, gpucost.reporting, gpucost; "
        "assert callable(gpucost.compare) and callable(gpucost.report); "
        "assert callable(gpucost.plan); import types; "
        "assert not isinstance(gpucost.compare, types.ModuleType); "
        "assert not isinstance(gpucost.plan, types.ModuleType)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_is_cheap() -> None:
    code = (
        "import sys, gpucost; "
        "print(sorted(m for m in ('numpy', 'pandas', 'torch', 'textual', 'boto3', 'rich') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_gpu_is_named_the_same_way_everywhere_and_a_wrong_type_is_one_error() -> None:
    p = gpucost.Profile.from_measurement(gpu="V100", throughput=1200.0, batch_size=256,
                                         precision="amp", param_count=25.6e6, name="resnet50")
    by_name = gpucost.fit_memory(p, "A100 80GB")
    assert by_name == gpucost.fit_memory(p, gpucost.get_gpu("A100 SXM4 80GB"))
    assert by_name.usable_gb > 70
    for wrong in (5, 2.5, b"A100"):
        with pytest.raises(gpucost.GpuCostError, match="unknown GPU"):
            gpucost.predict(p, gpu=wrong)  # type: ignore[arg-type]


def test_python_writes_the_plan_the_command_line_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    keywords = {"epochs": 10, "deadline_hours": 24, "budget_usd": 300}
    advice = gpucost.plan("resnet50-v100-amp", **keywords)
    with pytest.raises(gpucost.GpuCostError, match="save_plan writes a Plan, got Advice"):
        gpucost.save_plan(advice, "advice.toml")  # type: ignore[arg-type]
    written = gpucost.load_plan(gpucost.save_plan(gpucost.plan_file(advice), "api.toml"))
    assert main(["plan", "--epochs", "10", "--deadline-hours", "24", "--budget", "300",
                 "-o", "cli.toml"]) == 0
    by_cli = gpucost.load_plan("cli.toml")
    assert (written.offer, written.estimate, written.safety, written.job) == (
        by_cli.offer, by_cli.estimate, by_cli.safety, by_cli.job)
    fastest = gpucost.plan_file(advice, "fastest")
    assert fastest.estimate.hours <= written.estimate.hours
    with pytest.raises(gpucost.GpuCostError, match="no plan meets the constraints"):
        gpucost.plan_file(gpucost.plan("resnet50-v100-amp", epochs=10, budget_usd=0.01))
