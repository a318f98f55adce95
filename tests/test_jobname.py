"""A profile's name is a label ("GNMT v2", "bert-large/squad"); what gpucost makes of it by
default, a plan's run name and a profile's file, follows the job-name rule, so the doors agree:
plan writes what launch and preflight accept."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucost.cli import main
from gpucost.jobname import MAX_LENGTH, job_name_problem, name_from_label


@settings(max_examples=300, deadline=None)
@given(label=st.text(st.characters(exclude_categories=("Cs",)), max_size=300))
def test_any_label_becomes_a_name_the_rule_accepts_and_one_folder_inside_its_parent(
        label: str) -> None:
    name = name_from_label(label, "job")
    assert job_name_problem(name) is None, (label, name)
    parent = Path("/srv/checkpoints")
    assert (parent / name).parent == parent and len(name) <= MAX_LENGTH


@pytest.mark.parametrize("label, name", [("GNMT v2", "GNMT v2"),
                                         ("bert-large/squad v2", "bert-large-squad v2"),
                                         ("../../victim", "victim"), ("a..b", "a.b"),
                                         ("\x00", "job")])
def test_a_label_keeps_what_is_safe_and_loses_what_is_a_path(label: str, name: str) -> None:
    assert name_from_label(label, "job") == name


def test_plan_names_its_run_from_a_profile_name_that_is_no_job_name_and_launch_accepts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A profile named "bert-large/squad v2" had given plan a run name with a '/', and plan
    failed on its own default ("[job] name = ... is refused"), a name the user never gave."""
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "--measured", "300", "--gpu", "A100", "--batch", "32", "--params",
                 "340e6", "--precision", "amp", "--name", "bert-large/squad v2"]) == 0
    assert main(["plan", "-p", "profiles/bert-large-squad v2.json", "--samples", "1e7",
                 "-o", "plan.toml"]) == 0
    plan = tomllib.loads((tmp_path / "plan.toml").read_text())
    assert plan["job"]["name"] == "bert-large-squad v2"
    capsys.readouterr()
    assert main(["launch", "plan.toml", "--dry-run"]) == 0
    assert main(["preflight", "plan.toml"]) in (0, 1)  # a verdict, not an input error
    assert "[job] name" not in capsys.readouterr().out
