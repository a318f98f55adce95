"""`gpucost profile` end to end: built-in models, unmodified scripts, crashes and interrupts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from gpucost.cli import main
from gpucost.profile import Profile, resolve_profile
from gpucost.profiler.runner import run_script

REPO = Path(__file__).resolve().parents[1]

# An ordinary training script: argparse, a DataLoader, epochs, a __main__ guard. Nothing in
# it knows about gpucost. --crash-after raises after N optimizer steps; --mark-file is touched
# after --mark-after steps (so a test knows when to interrupt it).
TRAIN_SCRIPT = textwrap.dedent('''
    import argparse
    import pathlib
    import time

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset


    def main():
        ap = argparse.ArgumentParser()
        ap.add_argument("--batch", type=int, default=8)
        ap.add_argument("--epochs", type=int, default=1)
        ap.add_argument("--crash-after", type=int, default=0)
        ap.add_argument("--mark-after", type=int, default=0)
        ap.add_argument("--mark-file", default="")
        ap.add_argument("--step-sleep", type=float, default=0.0)
        args = ap.parse_args()
        torch.manual_seed(0)
        data = TensorDataset(torch.randn(256, 20), torch.randint(0, 3, (256,)))
        loader = DataLoader(data, batch_size=args.batch, shuffle=True)
        model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 3))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        steps = 0
        for _ in range(args.epochs):
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
                time.sleep(args.step_sleep)
                if steps == args.crash_after:
                    raise ValueError(f"diverged at step {steps}")
                if steps == args.mark_after and args.mark_file:
                    pathlib.Path(args.mark_file).touch()
        print(f"trained {steps} steps")


    if __name__ == "__main__":
        main()
''')


# A script that uses the library API itself, with a loop of its own (no DataLoader).
LIBRARY_SCRIPT = textwrap.dedent('''
    import torch
    from torch import nn

    from gpucost.profiler import StepProfiler

    model = nn.Linear(12, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def batches():
        while True:
            yield torch.randn(6, 12), torch.randn(6, 3)

    with StepProfiler(name="own", steps=3, warmup=1, model=model) as prof:
        for x, y in prof.wrap(batches()):
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    prof.save("own.json")
''')


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN_SCRIPT)
    (tmp_path / "own.py").write_text(LIBRARY_SCRIPT)
    return tmp_path


def test_profile_a_builtin_model_end_to_end(workdir: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    assert main(["profile", "--model", "mlp", "--batch", "32", "--steps", "5"]) == 0
    out = capsys.readouterr().out
    profile = Profile.load(workdir / "profiles" / "mlp.json")
    assert (profile.gpu, profile.batch_size, profile.steps_measured) == ("CPU", 32, 5)
    assert profile.flops_per_sample == pytest.approx(
        6 * (784 * 512 + 512 * 512 + 512 * 10) - 2 * 784 * 512)  # no gradient for the input
    assert profile.operators and profile.breakdown is not None and profile.verdict is not None
    assert profile.dataset_size == 60_000 and profile.epochs == 10
    assert f"verdict: {profile.verdict.kind}" in out
    assert "wrote profiles/mlp.json" in out
    # what `gpucost compare --profile FILE` reads
    assert resolve_profile("profiles/mlp.json") == profile


@pytest.mark.slow
def test_written_profiles_validate_against_the_json_schema(workdir: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "profiles" / "schema.json").read_text())
    assert main(["profile", "--model", "cnn", "--batch", "4", "--steps", "2", "--warmup", "1",
                 "--probe-batch", "--probe-max", "8"]) == 0
    assert main(["profile", "train.py", "--steps", "2", "--warmup", "1"]) == 0
    for path in (workdir / "profiles").glob("*.json"):
        jsonschema.validate(json.loads(path.read_text()), schema)


@pytest.mark.slow
def test_probe_batch_under_an_imposed_limit(workdir: Path, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    code = main(["profile", "--model", "mlp", "--probe-batch", "--memory-limit-gb", "0.012",
                 "--steps", "2", "--warmup", "1", "--devices", "2", "--format", "json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)["profile"]
    probe = doc["environment"]["probe"]
    local = probe["local_batch"]
    assert local >= 2 and local & (local - 1) == 0 and probe["global_batch"] == 2 * local
    assert probe["tried"][-1] == [2 * local, False]
    assert doc["max_batch_size"] == local == doc["batch_size"]


def test_profile_an_unmodified_script(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["profile", "train.py", "--steps", "4", "--warmup", "1",
                 "--", "--batch", "16", "--epochs", "50"])
    assert code == 0
    captured = capsys.readouterr()
    assert "trained" not in captured.out  # stopped after the planned steps, not 50 epochs
    p = Profile.load(workdir / "profiles" / "train.json")
    assert p.batch_size == 16  # the script's own --batch reached it, and the loader showed it
    assert (p.steps_measured, p.partial) == (4, False)
    assert p.param_count == 20 * 32 + 32 + 32 * 3 + 3
    assert p.breakdown is not None and p.breakdown.optimizer_s > 0
    assert p.flops_per_sample is not None and p.flops_per_sample > 0
    assert sys.argv[0] != "train.py"  # the process's argv is restored


@pytest.mark.slow
def test_a_script_that_uses_the_library_api_itself(workdir: Path) -> None:
    # on its own, the script profiles itself
    assert subprocess.run([sys.executable, "own.py"], cwd=workdir, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)}).returncode == 0
    alone = Profile.load(workdir / "own.json")
    assert (alone.batch_size, alone.steps_measured, alone.partial) == (6, 3, False)
    (workdir / "own.json").unlink()
    # under `gpucost profile`, its profiler defers to the runner's: one measurement, each
    # step counted once although both optimizer.step() and prof.step() end it
    assert main(["profile", "own.py", "--steps", "5", "--warmup", "1"]) == 0
    p = Profile.load(workdir / "profiles" / "own.json")
    assert (p.batch_size, p.steps_measured, p.partial) == (6, 5, False)
    assert p.param_count == 12 * 3 + 3
    run = run_script("own.py", steps=4, warmup=1)
    assert run.outcome == "complete"
    assert run.profiler._step_samples == [6, 6, 6, 6]  # one batch in every timed step


def test_a_script_that_ends_early_gives_a_partial_profile(workdir: Path) -> None:
    # 256 samples / batch 64 = 4 steps per epoch, 2 epochs: 8 steps, fewer than planned
    code = main(["profile", "train.py", "--steps", "20", "--warmup", "1", "--out", "early.json",
                 "--", "--batch", "64", "--epochs", "2"])
    assert code == 0
    p = Profile.load(workdir / "early.json")
    assert p.partial and p.steps_measured == 8 - 1 - 3


def test_a_crashing_script_leaves_a_partial_profile(workdir: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["profile", "train.py", "--steps", "50", "--warmup", "1",
                 "--", "--epochs", "10", "--crash-after", "10"])
    assert code == 2
    err = capsys.readouterr().err
    assert "ValueError: diverged at step 10" in err
    assert 'train.py", line' in err and "runpy" not in err  # the script's own traceback
    p = Profile.load(workdir / "profiles" / "train.json")
    assert p.partial and p.steps_measured == 10 - 1 - 3


def test_a_script_that_crashes_too_early_writes_nothing(workdir: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["profile", "train.py", "--", "--crash-after", "2"])
    assert code == 2
    err = capsys.readouterr().err
    assert "no profile written" in err and "at least 8 optimizer steps" in err
    assert not (workdir / "profiles").exists()


@pytest.mark.parametrize("argv, message", [
    ([], "nothing to profile"),
    (["missing.py"], "not found"),
    (["--model", "mlp", "--steps", "1"], "--steps must be at least 2"),
    (["--model", "mlp", "--batch", "0"], "--batch must be at least 1"),
    (["train.py", "--probe-batch"], "--probe-batch works with --model only"),
    (["train.py", "--model", "mlp"], "not a script and --model"),
])
def test_bad_input_is_one_line_and_exit_2(workdir: Path, capsys: pytest.CaptureFixture[str],
                                          argv: list[str], message: str) -> None:
    assert main(["profile", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("gpucost: error:") and "\n" not in err


def test_the_cli_parser_does_not_import_torch() -> None:
    code = ("import sys; from gpucost.cli import build_parser; build_parser(); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_an_interrupted_script_leaves_a_valid_partial_profile(workdir: Path, sig: int,
                                                              code: int) -> None:
    mark = workdir / "mark"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucost", "profile", "train.py", "--steps", "100000",
         "--warmup", "1", "--", "--epochs", "100000", "--step-sleep", "0.002",
         "--mark-after", "12", "--mark-file", str(mark)],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), proc.communicate()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "interrupted after" in out
    p = Profile.load(workdir / "profiles" / "train.json")
    assert p.partial and p.steps_measured is not None and p.steps_measured >= 12 - 1 - 3
    assert not list((workdir / "profiles").glob(".*.tmp"))  # no half-written file left


@pytest.mark.slow
def test_an_interrupt_before_enough_steps_is_a_clear_error(workdir: Path) -> None:
    mark = workdir / "mark"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpucost", "profile", "train.py", "--",
         "--epochs", "100000", "--step-sleep", "0.05", "--mark-after", "1",
         "--mark-file", str(mark)],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "no profile written" in err and "Traceback" not in err
    assert not (workdir / "profiles").exists()
