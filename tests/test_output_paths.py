"""Where plan's SkyPilot export and preflight's report are written follows the rule of every
file gpucost writes (gpucost/cli/outputs.py): checked before any work, into a folder that
exists, never onto a folder, and never over a file gpucost did not write for the same purpose
unless --force. A bad path is one line and exit 2, and nothing is lost."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpucost.cli import main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "notes.txt").write_text("keep me\n")
    return tmp_path


def one_line(err: str) -> str:
    assert err.count("\n") == 1, err
    assert "internal error" not in err
    return err


def test_an_export_never_replaces_a_file_that_is_not_one_unless_forced(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-o", "p.toml", "--export", "skypilot", "--export-out",
                 "notes.txt"]) == 2
    assert "notes.txt exists and is not a SkyPilot task gpucost wrote" in one_line(
        capsys.readouterr().err)
    assert (workdir / "notes.txt").read_text() == "keep me\n"
    assert not (workdir / "p.toml").exists()  # checked before the plan was written
    # next to -o, where it goes by default
    (workdir / "p.sky.yaml").write_text("name: my own task\n")
    assert main(["plan", "-o", "p.toml", "--export", "skypilot"]) == 2
    capsys.readouterr()
    assert (workdir / "p.sky.yaml").read_text() == "name: my own task\n"
    # an earlier export is replaced, and --force replaces anything
    assert main(["plan", "-o", "p.toml", "--export", "skypilot", "--export-out", "t.yaml"]) == 0
    assert main(["plan", "-o", "p.toml", "--export", "skypilot", "--export-out", "t.yaml"]) == 0
    assert main(["plan", "-o", "p.toml", "--export", "skypilot", "--export-out", "notes.txt",
                 "--force"]) == 0
    assert (workdir / "notes.txt").read_text().startswith("# SkyPilot task written by gpucost")


@pytest.mark.parametrize("out, message", [("d", "SkyPilot task d is a folder"),
                                          ("nope/t.yaml", "the folder nope does not exist")])
def test_an_export_path_that_cannot_be_a_file_is_one_line(
        workdir: Path, capsys: pytest.CaptureFixture[str], out: str, message: str) -> None:
    assert main(["plan", "--export", "skypilot", "--export-out", out]) == 2
    assert message in one_line(capsys.readouterr().err)
    assert not (workdir / "nope").exists()


@pytest.mark.parametrize("out, message", [("d", "preflight report d is a folder"),
                                          ("nope/r.md", "the folder nope does not exist")])
def test_a_report_path_that_cannot_be_a_file_is_one_line(
        workdir: Path, capsys: pytest.CaptureFixture[str], out: str, message: str) -> None:
    shutil.copy(REPO / "examples" / "plan.toml", workdir / "plan.toml")
    assert main(["preflight", "plan.toml", "--format", "markdown", "--output", out]) == 2
    assert message in one_line(capsys.readouterr().err)
    assert not (workdir / "nope").exists()


@pytest.mark.parametrize("command", [
    ["prices", "import", "skypilot-catalog", str(REPO / "tests")],
    ["prices", "refresh", "--source", "vast"],
])
def test_a_snapshot_folder_that_is_a_file_is_one_line_before_anything_is_fetched(
        workdir: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    assert main([*command, "--out", "notes.txt"]) == 2
    assert "--out notes.txt is a file, not a folder" in one_line(capsys.readouterr().err)
    assert (workdir / "notes.txt").read_text() == "keep me\n"
