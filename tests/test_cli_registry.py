"""The command registry (:mod:`gpucost.cli`): one help line per command, one lazy import point.

`gpucost` imports only the module of the command named; the top-level help, `gpucost` alone and
a misspelt command are answered from the registry's help lines. These tests hold the light
parser to the full one (every module's parsers built), so the help a user reads never depends
on which command was named, and a module cannot register a command the registry does not list.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucost.cli import COMMANDS, build_parser, command_word, main

ROOT = Path(__file__).resolve().parent.parent


def _commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_every_module_registers_the_commands_the_registry_lists_in_its_order() -> None:
    full = _commands(build_parser())
    assert list(full.choices) == [c.name for c in COMMANDS]
    for command in COMMANDS:  # each came from its module (a stand-in has only --help)
        assert len(full.choices[command.name]._actions) > 1, command.name


@pytest.mark.parametrize("load", [[], *([c.name] for c in COMMANDS)],
                         ids=["light", *(c.name for c in COMMANDS)])
def test_the_top_level_help_is_the_same_whichever_command_is_loaded(load: list[str]) -> None:
    assert build_parser(load).format_help() == build_parser().format_help()


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_a_command_parser_built_alone_is_the_full_one(name: str) -> None:
    alone = _commands(build_parser([name])).choices[name]
    assert alone.format_help() == _commands(build_parser()).choices[name].format_help()


@pytest.mark.parametrize("argv, word", [
    ([], None), (["--help"], None), (["--version"], None), (["compare", "-n", "3"], "compare"),
    (["-h", "plan"], "plan"), (["--", "gpus"], "gpus"), (["--"], None), (["nosuch"], "nosuch"),
])
def test_the_command_word_is_the_first_that_is_not_an_option(argv: list[str],
                                                              word: str | None) -> None:
    assert command_word(argv) == word


def test_a_misspelt_command_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["comapre"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpucost: error: argument COMMAND: invalid "
                                                   "choice: 'comapre' (choose from 'compare',")


def test_no_command_prints_the_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert capsys.readouterr().out == build_parser().format_help()


def test_the_installed_command_answers_help_and_a_bad_command() -> None:
    """As a user runs it: `python -m gpucost`, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    shown = subprocess.run([sys.executable, "-m", "gpucost", "--help"], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=120)
    assert shown.returncode == 0 and shown.stderr == ""
    for command in COMMANDS:
        assert command.name in shown.stdout
    bad = subprocess.run([sys.executable, "-m", "gpucost", "nosuch"], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert "invalid choice: 'nosuch'" in bad.stderr


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["compare"], ["compare", "--format", "csv"]])
def test_a_reader_that_stops_early_is_no_failure(argv: list[str], tmp_path: Path) -> None:
    """`gpucost compare | head` ends with 0, silently: exit 1 means a violated policy, and the
    rich table's console exited 1 on a closed pipe."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GPUCOST_HOME": str(tmp_path)}
    done = subprocess.Popen([sys.executable, "-m", "gpucost", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    assert done.stdout is not None and done.stderr is not None
    done.stdout.close()  # before the ranking is printed: its first write finds the pipe closed
    errors = done.stderr.read()
    assert done.wait(timeout=120) == 0
    assert errors == b""
