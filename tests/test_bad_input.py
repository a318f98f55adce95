"""Bad input on the planning commands: one line saying what is wrong, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpucost
from gpucost.cli import main
from gpucost.errors import InputError

ABSURD = [
    (["compare", "--epochs", "1e300"], "--epochs"),
    (["compare", "--samples", "1e300"], "--samples"),
    (["compare", "--samples", "nan"], "--samples"),
    (["compare", "--steps", "1e14"], "at most 1e+15"),  # 2.6e16 samples of the profile's batch
    (["compare", "--stale-days", "-1"], "--stale-days"),
    (["compare", "--data-gb", "1e300"], "--data-gb"),
    (["compare", "--interruption-rate", "-0.5"], "--interruption-rate"),
    (["compare", "--gpu-count", "0"], "--gpu-count"),
    (["compare", "--epochs", "ten"], "'ten' is not a number"),
    (["plan", "--epochs", "1e300"], "--epochs"),
    (["plan", "--budget", "1e300"], "--budget"),
    (["plan", "--deadline-hours", "inf"], "--deadline-hours"),
    (["plan", "--p-no-capacity", "2"], "--p-no-capacity"),
    (["explain", "--epochs", "-3"], "--epochs"),
    (["predict", "--gpu", "A100", "-k", "0"], "--gpus-per-node/-k"),
    (["predict", "--gpu", "A100", "-k", "1000"], "--gpus-per-node/-k"),
    (["predict", "--gpu", "A100", "-n", "100000"], "--nodes/-n"),
    (["predict", "--gpu", "A100", "--grad-accum", "0"], "--grad-accum"),
    (["scale", "--gpu", "A100", "-k", "1000"], "--gpus-per-node/-k"),
    (["scale", "--gpu", "A100", "-N", "100000"], "--max-nodes/-N"),
    (["scale", "--gpu", "A100", "--epochs", "1e300"], "--epochs"),
    (["breakeven", "--running-hr", "1", "--disk-gb", "-5", "--gb-month", "0.1"], "--disk-gb"),
    (["breakeven", "--running-hr", "1", "--disk-gb", "5", "--gb-month", "0.1",
      "--month-hours", "7300"], "--month-hours"),
]


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("gpucost: error: "), err
    assert "Traceback" not in err and captured.out == ""
    return err


@pytest.mark.parametrize(("argv", "named"), ABSURD)
def test_absurd_numbers_are_one_line_exit_2(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert named in _one_line_error(capsys)


def test_the_api_refuses_an_absurd_job_too() -> None:
    with pytest.raises(InputError, match="at most 1e"):
        gpucost.compare(epochs=1e300, dataset_size=1e6)


@pytest.mark.parametrize(
    ("name", "message"),
    [("plots", "is a folder"), ("new/scaling.png", "does not exist"),
     ("scaling.jpg", "must end in .png")],
)
def test_plot_target_is_checked_before_any_work(
    tmp_path: Path, name: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plots").mkdir()
    target = tmp_path / name
    assert main(["scale", "--gpu", "A100", "-N", "2", "--plot", str(target)]) == 2
    assert message in _one_line_error(capsys)
    assert not (tmp_path / "new").exists()  # was: the missing folder was created
    assert not (tmp_path / "scaling.jpg").exists()


def test_plan_output_refuses_to_overwrite_a_file_that_is_not_a_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("two years of lab notes\n")
    argv = ["plan", "--epochs", "1", "-o", str(notes)]
    assert main(argv) == 2
    assert "not a gpucost plan" in _one_line_error(capsys)
    assert notes.read_text() == "two years of lab notes\n"
    assert main([*argv, "--force"]) == 0
    assert 'schema = "gpucost-plan"' in notes.read_text()
    # an earlier plan is replaced without --force: re-planning is the normal loop
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["plan", "--epochs", "1", "-o", str(tmp_path / "missing" / "p.toml")]) == 2
    assert "does not exist" in _one_line_error(capsys)
    assert not (tmp_path / "missing").exists()
    assert main(["plan", "--epochs", "1", "-o", str(tmp_path)]) == 2
    assert "is a folder" in _one_line_error(capsys)


def _broken_table(*_args: object) -> str:
    raise RuntimeError("a\nbug")


def test_a_bug_in_a_command_is_one_line_and_exit_3_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # main()'s safety net: an exception outside the error tree is gpucost's bug, not the user's
    # input; it is reported in one line with the internal-error exit code.
    import gpucost.cli.gpus as gpus_cli

    monkeypatch.delenv("GPUCOST_DEBUG", raising=False)
    monkeypatch.setattr(gpus_cli, "format_table", _broken_table)
    assert main(["gpus"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("gpucost: internal error: RuntimeError: a bug")
    assert "GPUCOST_DEBUG=1" in err
    monkeypatch.setenv("GPUCOST_DEBUG", "1")
    with pytest.raises(RuntimeError):
        main(["gpus"])


def test_ctrl_c_while_the_parser_is_built_is_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Was (#22): Ctrl-C in the first half second printed a traceback: the parser, which
    imports every command, was built outside main()'s handlers."""
    import gpucost.cli as cli

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["compare"]) == 130
    assert capsys.readouterr().err == "gpucost: interrupted\n"
