"""Fuzzing (issue 16 item 8): every file gpucost reads, damaged at random, and every command
given random arguments. Whatever comes in, a command exits 0, 1, 2 or 3 without a traceback and
changes no file outside its temporary folder; a reader returns or raises gpucost's own one-line
error.

Bounded so that it runs inside the full test run that CI makes; marked slow as well (90 to
150 s of a 500 s run on a shared 2-core machine), so that ``-m "not slow"`` leaves it out day
to day: the hostile-input tests check the same promises by example. Select it with ``-m fuzz``;
set GPUCOST_FUZZ_EXAMPLES=1000 for a deeper search.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import tempfile
import tomllib
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpucost
from gpucost import measurements
from gpucost.cli import build_parser, main
from gpucost.errors import GpuCostError
from gpucost.executor.ledger import Ledger
from gpucost.executor.rundir import RunDir
from gpucost.executor.runfiles import RunFileError
from gpucost.planfile import load_plan
from gpucost.preflight.policy import load_policy
from gpucost.pricing.snapshot import read_snapshot
from gpucost.profile import Profile

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = REPO_ROOT / "examples"
EXAMPLES_PER_TEST = int(os.environ.get("GPUCOST_FUZZ_EXAMPLES", "100"))

FUZZ = settings(
    max_examples=EXAMPLES_PER_TEST,
    deadline=None,
    database=None,  # nothing written into the repository
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large],
)


# ---- what must not change ----------------------------------------------------------------------
_SKIPPED = {".git", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache", "__pycache__"}


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` (caches and virtual environments aside): mtime and size."""
    state: dict[str, tuple[int, int]] = {}
    if not root.is_dir():
        return state
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIPPED and not d.startswith(".venv")]
        for name in files:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue
            state[path] = (info.st_mtime_ns, info.st_size)
    return state


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The working folder for one fuzz test; afterwards, nothing outside it has changed."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "mpl"))  # `scale --plot`'s font cache
    watched = [REPO_ROOT, Path.home() / ".gpucost"]
    before = [_tree(root) for root in watched]
    yield work
    for root, old in zip(watched, before, strict=True):
        new = _tree(root)
        changed = sorted(p for p in old.keys() | new.keys() if old.get(p) != new.get(p))
        assert not changed, f"fuzzing changed files outside its folder: {changed[:5]}"


def _cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> int:
    """Run one command in-process: any exception but SystemExit fails the test (a traceback)."""
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse: usage errors (2) and --help (0)
        code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 2
    err = capsys.readouterr().err
    assert code in (0, 1, 2, 3), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    assert "internal error" not in err, (argv, err)  # main()'s safety net caught a bug
    errors = [line for line in err.splitlines() if line.startswith("gpucost: error:")]
    assert len(errors) <= 1, (argv, err)
    return code


def _reads_or_refuses(read: Callable[[], Any], allowed: type[Exception] = GpuCostError) -> None:
    try:
        read()
    except allowed as err:
        assert "\n" not in str(err), str(err)


# ---- damaged documents -------------------------------------------------------------------------
_ODD_NUMBERS = [0, -0.0, -1, 1e308, 1e23, 2**63, -(2**63) - 1, 1e-320, 0.5, 3]
_ODD_TEXT = ["", " ", "\x00", "a\x00b", "\n", "é", "../../etc/passwd", "/dev/zero", "A100",
             "spot", "NaN", "1e999", "x" * 300]
_SCALARS = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(),  # NaN and infinities included
    st.sampled_from(_ODD_NUMBERS),
    st.text(max_size=12),
    st.sampled_from(_ODD_TEXT),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6,
)


@st.composite
def _mutated(draw: st.DrawFn, document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with one to three fields set to hostile values, removed or added."""
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        target: dict[str, Any] = doc
        if not doc:
            doc[draw(st.text(min_size=1, max_size=8))] = draw(_VALUES)
            continue
        key = draw(st.sampled_from(sorted(doc)))
        if isinstance(doc[key], dict) and doc[key] and draw(st.booleans()):
            target, key = doc[key], draw(st.sampled_from(sorted(doc[key])))
        action = draw(st.sampled_from(["set", "set", "delete", "add"]))
        if action == "delete":
            target.pop(key, None)
        elif action == "set":
            target[key] = draw(_VALUES)
        else:
            target[draw(st.text(min_size=1, max_size=8))] = draw(_VALUES)
    return doc


@st.composite
def _damaged_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` cut short, with random bytes spliced in, or deeply nested, or as it is."""
    kind = draw(st.sampled_from(["as-is", "truncate", "splice", "nest", "garbage"]))
    if kind == "truncate":
        return data[: draw(st.integers(0, len(data)))]
    if kind == "splice":
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    if kind == "nest":
        depth = draw(st.sampled_from([40, 5000]))
        return data[:1] + b"[" * depth + b"]" * depth + data[1:]
    if kind == "garbage":
        return draw(st.binary(max_size=64))
    return data


def _toml(doc: dict[str, Any]) -> bytes:
    try:
        return tomli_w.dumps(doc).encode()
    except (TypeError, ValueError):  # a value TOML cannot hold: write it as a bare string
        return repr(doc).encode()


def _json(doc: Any) -> bytes:
    return json.dumps(doc).encode()  # NaN and Infinity tokens included


def _documents(base: dict[str, Any], encode: Callable[[Any], bytes]) -> st.SearchStrategy[bytes]:
    return _mutated(base).map(encode).flatmap(_damaged_bytes)


PLAN = tomllib.loads((EXAMPLES / "plan.toml").read_text())
POLICY = tomllib.loads((EXAMPLES / "policy.toml").read_text())
PROFILE = json.loads((REPO_ROOT / "profiles" / "resnet50-v100-amp.json").read_text())
STATUS = {"run_id": "fz-1", "name": "fz", "state": "running", "provider": "local",
          "elapsed_s": 12.0, "cost_usd": 0.01, "budget_cap_usd": 0.05, "timeout_s": 900.0,
          "epoch": 1, "epochs": 2.0, "eta_s": 30.0, "metrics": {"loss": 0.5},
          "throughput": 900.0, "planned_throughput": 1000.0, "launcher_pid": 1, "final": False,
          "checkpoint": "/ck/epoch-1.pt", "verify": {"deviation_pct": -10.0,
                                                     "within_margin": True},
          "updated_at": 1.0}
REPORT = {"time": 1.0, "epoch": 1, "metrics": {"loss": 0.5}, "throughput": 900.0,
          "checkpoint": None}


def _small_snapshot() -> dict[str, Any]:
    path = sorted((REPO_ROOT / "pricing_snapshots" / "skypilot-aws").glob("*.json"))[-1]
    doc: dict[str, Any] = json.loads(path.read_text())
    doc["columns"] = {k: v[:3] if isinstance(v, list) else v for k, v in doc["columns"].items()}
    return doc


SNAPSHOT = _small_snapshot()


def _plan_folder(work: Path, data: bytes) -> Path:
    (work / "train_tiny.py").write_bytes((EXAMPLES / "train_tiny.py").read_bytes())
    plan = work / "plan.toml"
    plan.write_bytes(data)
    return plan


@FUZZ
@given(data=_documents(PLAN, _toml))
def test_plan_files(sandbox: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    plan = _plan_folder(sandbox, data)
    _reads_or_refuses(lambda: load_plan(plan))
    _cli(capsys, ["explain", str(plan)])
    _cli(capsys, ["preflight", str(plan), "--today", "2026-11-30", "--format", "json"])
    _cli(capsys, ["launch", str(plan), "--dry-run"])


@FUZZ
@given(data=_documents(POLICY, _toml), baseline=_documents({"schema": "gpucost-preflight",
                                                            "estimate": {"cost_usd": 1.0}},
                                                           _json))
def test_policy_and_baseline_files(sandbox: Path, capsys: pytest.CaptureFixture[str],
                                   data: bytes, baseline: bytes) -> None:
    plan = _plan_folder(sandbox, (EXAMPLES / "plan.toml").read_bytes())
    (sandbox / "policy.toml").write_bytes(data)
    (sandbox / "old.json").write_bytes(baseline)
    _reads_or_refuses(lambda: load_policy(sandbox / "policy.toml", ("budget", "main-guard")))
    _cli(capsys, ["preflight", str(plan), "--policy", "policy.toml", "--baseline", "old.json",
                  "--today", "2026-11-30", "--format", "json"])


@FUZZ
@given(data=_documents(PROFILE, _json))
def test_profile_files(sandbox: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    (sandbox / "p.json").write_bytes(data)
    _reads_or_refuses(lambda: Profile.load(sandbox / "p.json"))
    _cli(capsys, ["predict", "-p", "p.json", "--gpu", "A100", "-k", "8", "-n", "2"])
    _cli(capsys, ["compare", "-p", "p.json", "-n", "3"])


@FUZZ
@given(status=_documents(STATUS, _json), progress=_documents(REPORT, _json),
       metrics=st.lists(_documents(REPORT, _json), max_size=3))
def test_run_files(sandbox: Path, capsys: pytest.CaptureFixture[str], status: bytes,
                   progress: bytes, metrics: list[bytes]) -> None:
    rd = RunDir(sandbox / "run")
    if not rd.path.exists():
        rd.create()
        with Ledger() as ledger:
            ledger.create_run(run_id="fz-1", name="fz", plan_path="p", provider="local",
                              run_dir=str(rd.path), price_hr=0.01, nodes=1, budget_cap_usd=1.0)
    rd.status_path.write_bytes(status)
    rd.progress_path.write_bytes(progress)
    rd.metrics_path.write_bytes(b"\n".join(metrics))
    assert rd.read_progress() is None or isinstance(rd.read_progress(), dict)  # never raises
    _reads_or_refuses(rd.metrics, RunFileError)
    _reads_or_refuses(rd.read_status, RunFileError)
    _cli(capsys, ["status", "fz-1"])
    _cli(capsys, ["status", "fz-1", "--format", "json"])
    _cli(capsys, ["logs", "fz-1"])


@FUZZ
@given(data=_documents(SNAPSHOT, _json))
def test_price_snapshots(sandbox: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    folder = sandbox / "prices" / "skypilot-aws"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "2026-11-30.json").write_bytes(data)
    _reads_or_refuses(lambda: read_snapshot(folder / "2026-11-30.json"))
    _cli(capsys, ["compare", "--prices", str(folder / "2026-11-30.json"), "-n", "3"])
    _cli(capsys, ["prices", "show", "--prices", str(sandbox / "prices")])


MEASUREMENTS = {"format": "gpucost-measurements", "version": 1, "measurements": [
    {"id": "0123abcd", "workload": "resnet50-v100-amp", "gpu": "A100 SXM4 80GB",
     "precision": "amp", "batch_size": 256, "device_count": 1, "throughput": 2500.0,
     "source": "profile", "recorded_at": "2026-11-30T20:00:00Z", "sample_unit": "images"}]}


@FUZZ
@given(data=_documents(MEASUREMENTS, _json))
def test_measurement_store(sandbox: Path, capsys: pytest.CaptureFixture[str],
                           data: bytes) -> None:
    store = measurements.store_path()
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_bytes(data)
    _reads_or_refuses(measurements.read_all)
    _cli(capsys, ["calibrate", "list"])
    _cli(capsys, ["predict", "-p", "resnet50-v100-amp", "--gpu", "H100", "-k", "8"])


def _ledger_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.sqlite"
        with Ledger(path) as ledger:
            ledger.create_run(run_id="fz-1", name="fz", plan_path="p", provider="local",
                              run_dir=str(Path(folder) / "run"), price_hr=0.01, nodes=1,
                              budget_cap_usd=1.0)
        return path.read_bytes()


LEDGER = _ledger_bytes()


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # a long repr
@FUZZ
@given(data=_damaged_bytes(LEDGER))
def test_ledger(sandbox: Path, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    # Only commands that read it: down, stop and cleanup would signal the recorded launcher,
    # which is this test process.
    home = Path(os.environ["GPUCOST_HOME"])
    for stale in home.glob("ledger.sqlite*"):
        stale.unlink(missing_ok=True)  # a connection closed by the GC takes its -wal along
    (home / "ledger.sqlite").write_bytes(data)
    _cli(capsys, ["ps"])
    _cli(capsys, ["ps", "--all", "--format", "json"])
    _cli(capsys, ["status", "fz-1"])


# ---- random arguments to every command ---------------------------------------------------------
@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]  # e.g. ("prices", "show")
    positionals: int
    options: tuple[tuple[str, bool, tuple[str, ...]], ...]  # (option, takes a value, choices)


# Commands that would reach the network, start a UI, run a training script or a job: the fuzz
# gives them no arguments that could (launch and probe always run with --dry-run).
_NOT_RUN = {("prices", "refresh"), ("profile",), ("tui",)}
_NOT_GIVEN = {"--help", "--detach", "--follow"}


def _commands() -> list[Command]:
    found = []

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        positionals, options = 0, []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))
                return
            if not action.option_strings:
                positionals += 1
            elif action.option_strings[-1] not in _NOT_GIVEN:
                choices = tuple(str(c) for c in action.choices or ())
                options.append((action.option_strings[-1], action.nargs != 0, choices))
        if words and words not in _NOT_RUN:
            found.append(Command(words, positionals, tuple(options)))

    walk(build_parser(), ())
    return found


COMMANDS = _commands()
_WORDS = ["0", "-0", "-1", "0.5", "3", "8", "1024", "1e23", "1e308", "1e999", "inf", "-inf",
          "nan", "", " ", "A100", "H100", "V100 SXM2 16GB", "CPU", "aws", "vast", "local",
          "skypilot-catalog", "us-east-1", "resnet50-v100-amp", "json", "csv", "table",
          "markdown", "github", "time", "cost", "2026-11-30", "11/30/2026", ".", "..",
          "plan.toml", "p.json", "missing.json", "out/x.toml", "fz-1", "é", "x" * 200]
_ARGUMENT = st.one_of(
    st.sampled_from(_WORDS),
    st.integers().map(str),
    st.floats().map(repr),
    # No "/" (an absolute path could name a real file) and no NUL (no OS argv holds one).
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
            max_size=10).filter(lambda s: not s.startswith("~")),
)


@st.composite
def _argv(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(COMMANDS))
    rest = [draw(_ARGUMENT) for _ in range(command.positionals) if draw(st.integers(0, 5))]
    for _ in range(draw(st.integers(0, 4))):
        if not command.options:
            break
        option, takes_value, choices = draw(st.sampled_from(command.options))
        if takes_value:  # one of its choices half the time: deeper than a usage error
            value = draw(st.sampled_from(choices) if choices and draw(st.booleans())
                         else _ARGUMENT)
            rest += [option, value]
        else:
            rest.append(option)
    if command.words in (("launch",), ("probe",)):
        rest.append("--dry-run")
    return [*command.words, *draw(st.permutations(rest))]


@settings(FUZZ, max_examples=EXAMPLES_PER_TEST * 3)
@given(argv=_argv())
def test_command_arguments(sandbox: Path, capsys: pytest.CaptureFixture[str],
                           argv: list[str]) -> None:
    if not (sandbox / "plan.toml").exists():
        _plan_folder(sandbox, (EXAMPLES / "plan.toml").read_bytes())
        (sandbox / "p.json").write_text(json.dumps(PROFILE))
    _cli(capsys, argv)


def test_every_command_is_fuzzed_but_those_that_leave_the_machine() -> None:
    words = {c.words for c in COMMANDS}
    assert {("compare",), ("plan",), ("preflight",), ("prices", "show"), ("status",),
            ("launch",), ("probe",)} <= words
    assert not words & _NOT_RUN


@FUZZ
@given(epoch=_VALUES, metrics=_VALUES | st.dictionaries(st.text(max_size=5), _VALUES),
       throughput=_VALUES)
def test_report_takes_anything(sandbox: Path, monkeypatch: pytest.MonkeyPatch, epoch: Any,
                               metrics: Any, throughput: Any) -> None:
    rd = RunDir(sandbox / "run")
    if not rd.path.exists():
        rd.create()
    monkeypatch.setenv("GPUCOST_RUN_DIR", str(rd.path))
    gpucost.report(epoch=epoch, metrics=metrics, throughput=throughput)
    assert rd.metrics()  # recorded, and every line passes the run-file model
    assert rd.read_progress() == rd.metrics()[-1]


# ---- terminal text -----------------------------------------------------------------------------
# Text a file or a job controls (profile names, status and metric names, measured workloads)
# reaches the terminal: whatever it holds, what a command prints holds no escape sequence, no
# carriage return and no other control character but the line breaks gpucost itself prints.
_HOSTILE_TEXT = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40),
    st.sampled_from(["\x1b[2J\x1b[H", "\x1b]0;pwned\x07", "a\rb", "\x9b31m", "x\ny", "\u2028",
                     "\x00", "[red]markup[/red]"]),
)


def _printed_cleanly(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code = main(argv)
    assert code in (0, 1, 2, 3), (argv, code)
    out, err = capsys.readouterr()
    bad = sorted({c for c in out + err
                  if (unicodedata.category(c) == "Cc" and c != "\n") or c in "\u2028\u2029"})
    assert not bad, (argv, bad, out[-300:], err[-300:])


@FUZZ
@given(name=_HOSTILE_TEXT, description=_HOSTILE_TEXT, unit=_HOSTILE_TEXT)
def test_profile_text_reaches_the_terminal_clean(sandbox: Path, capsys: pytest.CaptureFixture[str],
                                                 name: str, description: str, unit: str) -> None:
    (sandbox / "p.json").write_text(json.dumps(
        {**PROFILE, "name": name, "description": description, "sample_unit": unit}))
    _printed_cleanly(capsys, ["predict", "-p", "p.json", "--gpu", "A100"])
    _printed_cleanly(capsys, ["compare", "-p", "p.json", "-n", "3"])


@FUZZ
@given(metric=_HOSTILE_TEXT, name=_HOSTILE_TEXT, checkpoint=_HOSTILE_TEXT)
def test_run_text_reaches_the_terminal_clean(sandbox: Path, capsys: pytest.CaptureFixture[str],
                                             metric: str, name: str, checkpoint: str) -> None:
    rd = RunDir(sandbox / "run")
    if not rd.path.exists():
        rd.create()
        with Ledger() as ledger:
            ledger.create_run(run_id="fz-1", name="fz", plan_path="p", provider="local",
                              run_dir=str(rd.path), price_hr=0.01, nodes=1, budget_cap_usd=1.0)
    rd.status_path.write_text(json.dumps(
        {**STATUS, "name": name, "metrics": {metric: 0.5}, "checkpoint": checkpoint}))
    rd.metrics_path.write_text(json.dumps({**REPORT, "metrics": {metric: 0.5}}) + "\n")
    _printed_cleanly(capsys, ["status", "fz-1"])
    _printed_cleanly(capsys, ["ps", "--all"])


@FUZZ
@given(workload=_HOSTILE_TEXT, unit=_HOSTILE_TEXT)
def test_measured_workload_text_reaches_the_terminal_clean(
        sandbox: Path, capsys: pytest.CaptureFixture[str], workload: str, unit: str) -> None:
    store = measurements.store_path()
    store.parent.mkdir(parents=True, exist_ok=True)
    record = {**MEASUREMENTS["measurements"][0], "workload": workload, "sample_unit": unit}
    store.write_text(json.dumps({**MEASUREMENTS, "measurements": [record]}))
    _printed_cleanly(capsys, ["calibrate", "list"])
