"""What gpucost says names things that exist and reads right: commands, profiles, the next
command to run, ages and sources in preflight, checkpoints in explain (defects found as a new
user, issue 14 item 9; each test failed before its fix)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest

from gpucost.cli import build_parser, main

REPO_ROOT = Path(__file__).resolve().parents[1]


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


def test_the_next_command_quotes_a_profile_path_with_a_space(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: "next: gpucost compare --profile profiles/GNMT v2.json --samples N", which a shell
    # splits at the space into a missing profile and a stray argument.
    import shlex

    from gpucost.cli.profile import next_command
    from gpucost.profile import Profile

    spaced = Profile.from_measurement(gpu="T4", throughput=100.0, batch_size=32,
                                      precision="amp", param_count=1e7, name="GNMT v2")
    path = spaced.save(tmp_path / "my profiles" / "GNMT v2.json")
    argv = shlex.split(next_command(spaced, path).split(",")[0].replace("--samples N",
                                                                        "--samples 1e6"))
    assert argv[:3] == ["gpucost", "compare", "--profile"] and argv[3] == str(path)
    assert main(argv[1:]) == 0


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

