"""A missing optional package is an install step, not a gpucost bug: exit 2, one line, the extra.

Each test makes one optional package unimportable: in this process by a ``None`` entry in
``sys.modules`` (what Python does for a package it refused), and for the child processes a
launch starts by a stand-in package on PYTHONPATH that fails to import, as a missing one does.
"""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from gpucost.cli import main
from gpucost.errors import InputError
from gpucost.extras import EXTRAS, MissingExtraError, installed, optional, require

ROOT = Path(__file__).resolve().parent.parent


def _block(monkeypatch: pytest.MonkeyPatch, top: str) -> None:
    """Make ``top`` (and its submodules) unimportable in this process."""
    for name in list(sys.modules):
        if name == top or name.startswith(top + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)


def _forget(monkeypatch: pytest.MonkeyPatch, prefix: str) -> None:
    """Drop gpucost's modules under ``prefix`` so the next import runs their imports again."""
    for name in list(sys.modules):
        if name.startswith(prefix):
            monkeypatch.delitem(sys.modules, name)


def _one_line_naming(err: str, extra: str) -> None:
    assert err.count("\n") == 1, err
    assert f"install gpucost[{extra}]" in err and f'pip install "gpucost[{extra}]"' in err
    assert "Traceback" not in err and "internal error" not in err


def test_every_extra_named_is_one_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for module, (extra, _) in EXTRAS.items():
        assert extra in declared, f"{module}: no extra {extra!r} in pyproject.toml"


@pytest.mark.parametrize("module", sorted(EXTRAS))
def test_require_of_a_missing_package_is_an_input_error_naming_its_extra(
        monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    _block(monkeypatch, module)
    with pytest.raises(MissingExtraError) as caught:
        require(module, needed_for="this command")
    err = caught.value
    assert isinstance(err, InputError) and err.exit_code == 2
    assert err.extra == EXTRAS[module][0]
    assert str(err).startswith(f"this command needs {EXTRAS[module][1]}: install gpucost[")
    assert not installed(module) and optional(module) is None


def test_require_keeps_a_failure_inside_an_installed_package_a_bug(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # matplotlib is there but one of its own dependencies is not: that is no missing extra
    (tmp_path / "matplotlib").mkdir()
    (tmp_path / "matplotlib" / "__init__.py").write_text("import kiwisolver_not_here\n")
    _block(monkeypatch, "matplotlib")
    monkeypatch.delitem(sys.modules, "matplotlib")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError):
        require("matplotlib", needed_for="scale --plot")


def test_scale_plot_without_matplotlib(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    _block(monkeypatch, "matplotlib")
    out = tmp_path / "curve.png"
    assert main(["scale", "--plot", str(out)]) == 2
    captured = capsys.readouterr()
    _one_line_naming(captured.err, "plot")
    assert "scale --plot needs matplotlib" in captured.err
    assert not out.exists() and captured.out == ""


def test_launch_without_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    # the example plan runs on this machine; its workdir is the plan's folder, so a copy
    examples = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", examples)
    fake = tmp_path / "no-torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))  # the launch's own children
    _block(monkeypatch, "torch")
    assert main(["launch", str(examples / "plan.toml")]) == 2
    err = capsys.readouterr().err
    _one_line_naming(err, "torch")
    assert "CUDA" not in err  # no hint at a wrong build: torch is not there at all
    assert not (examples / "checkpoints").exists()  # refused before the run
    runs = Path(os.environ["GPUCOST_HOME"]) / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_profile_without_torch(monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    _block(monkeypatch, "torch")
    _forget(monkeypatch, "gpucost.profiler")
    assert main(["profile", "--model", "mlp"]) == 2
    _one_line_naming(capsys.readouterr().err, "torch")


def test_the_profiler_library_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "torch")
    _forget(monkeypatch, "gpucost.profiler")
    with pytest.raises(MissingExtraError, match=r"install gpucost\[torch\]"):
        import gpucost.profiler  # noqa: F401


def test_tui_without_textual(monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    _block(monkeypatch, "textual")
    _forget(monkeypatch, "gpucost.tui")
    assert main(["tui"]) == 2
    _one_line_naming(capsys.readouterr().err, "tui")


def test_an_s3_checkpoint_target_without_boto3(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    from gpucost.executor.checkpoints import CheckpointStore

    _block(monkeypatch, "boto3")
    store = CheckpointStore("s3://bucket/ckpt", namespace="job")
    with pytest.raises(MissingExtraError, match=r"install gpucost\[aws\]"):
        store.ship(tmp_path / "epoch-1.pt", 1)


def test_the_local_machine_without_nvml_is_described_as_its_cpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gpucost.local import detect

    _block(monkeypatch, "pynvml")
    machine = detect()
    assert machine.gpu == "CPU" and machine.detected_by.startswith("none")
