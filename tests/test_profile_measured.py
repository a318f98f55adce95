"""`gpucost profile --measured`: a throughput measured by hand or published becomes a profile
that every --profile command reads, without torch and without running anything (issue 20's
question, "I measured my model on GPU A at my batch: what do I get on GPU B?", from the
command line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucost.cli import main
from gpucost.profile import Profile

REPO = Path(__file__).resolve().parents[1]

GNMT = ["profile", "--measured", "20000", "--gpu", "A100 80GB", "--batch", "1024",
        "--params", "160e6", "--precision", "amp", "--name", "GNMT v2"]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_measured_throughput_is_the_profile_the_library_makes_of_it(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(GNMT) == 0
    out = capsys.readouterr().out
    written = Profile.load(workdir / "profiles" / "GNMT v2.json")
    expected = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=20000.0,
                                        batch_size=1024, precision="amp", param_count=160e6,
                                        name="GNMT v2")
    assert written.to_dict() == expected.to_dict()
    # the name picked the workload that sets its activations, which fit where it was measured
    assert "workload: seq2seq-rnn" in out and "memory: fits:" in out
    assert "20,000.0 samples/s measured (a step of 51.2 ms)" in out


def test_a_measured_profile_is_replanned_on_a_card_its_batch_does_not_fit(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(GNMT) == 0
    capsys.readouterr()
    assert main(["predict", "-p", "profiles/GNMT v2.json", "--gpu", "RTX 3070"]) == 0
    out = capsys.readouterr().out
    assert "batch 1024 does not fit RTX 3070" in out and "accumulation steps" in out


def test_a_second_measured_batch_measures_the_step_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["profile", "--measured", "1200", "--gpu", "V100", "--batch", "256", "--params",
            "25.6e6", "--precision", "amp", "--name", "resnet50", "--also-measured", "64=700"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    profile = Profile.load(workdir / "profiles" / "resnet50.json")
    assert profile.other_batches == ((64, pytest.approx(64 / 700)),)
    # 256 samples in 213.3 ms and 64 in 91.4 ms: 50.8 ms a step whatever its batch (24 %)
    assert "also measured: batch 64: 700.0 samples/s" in out
    assert "the step's fixed part at batch 256: 24 %" in out
    assert main(["predict", "-p", "profiles/resnet50.json", "--batch", "128", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    step_128 = 0.2133 - (0.2133 - 64 / 700) * (256 - 128) / (256 - 64)  # on the measured line
    assert doc["step_time_s"] == pytest.approx(step_128, rel=0.01)


def test_a_measurement_no_workload_explains_says_its_memory_is_unknown(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["profile", "--measured", "100", "--gpu", "RTX 4090", "--batch", "8", "--params",
            "7e6", "--name", "mystery", "--out", "m.json"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "workload: none matched" in out and "memory: unknown" in out
    assert "fits" not in out
    assert Profile.load(workdir / "m.json").precision == "fp32"  # the stated default


def test_a_measured_peak_sets_the_memory_a_sample_keeps(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["profile", "--measured", "100", "--gpu", "RTX 4090", "--batch", "8", "--params",
            "7e6", "--name", "mystery", "--peak-memory-gb", "12"]
    assert main(argv) == 0
    assert "memory: fits: 12.0 of 23.5 GB usable" in capsys.readouterr().out
    # on a 10 GB card the 8 samples' 11.9 GB (12 less 0.1 of model states) cannot fit
    assert main(["predict", "-p", "profiles/mystery.json", "--gpu", "RTX 3080"]) == 0
    assert "batch 8 does not fit RTX 3080" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--measured", "100", "--batch", "8", "--params", "1e6"], "--measured needs --gpu"),
    (["--measured", "100", "--gpu", "T4"], "--measured needs --batch, --params"),
    (["--measured", "100", "--gpu", "NoSuchGPU", "--batch", "8", "--params", "1e6"],
     "unknown GPU 'NoSuchGPU'"),
    (["--measured", "100", "--gpu", "T4", "--batch", "8", "--params", "1e6", "--workload", "x"],
     "unknown workload 'x'"),
    (["--measured", "100", "--gpu", "T4", "--batch", "8", "--params", "1e6",
      "--also-measured", "64"], "give BATCH=SAMPLES_PER_S"),
    (["--measured", "100", "--gpu", "T4", "--batch", "8", "--params", "1e6",
      "--also-measured", "8=50"], "batch 8 is measured already"),
    (["--measured", "100", "--gpu", "T4", "--batch", "8", "--params", "1e6", "--probe-batch"],
     "--probe-batch runs the profiler"),
    (["--measured", "-3", "--gpu", "T4", "--batch", "8", "--params", "1e6"],
     "argument --measured: must be above 0"),
    (["--measured", "100", "--gpu", "RTX 4090", "--batch", "8", "--params", "1e6",
      "--peak-memory-gb", "30"], "--peak-memory-gb 30 is more than a RTX 4090 holds (25.8 GB)"),
    (["--model", "mlp", "--measured", "100"], "not --model and --measured"),
    (["--model", "mlp", "--gpu", "T4"], "--gpu works with --measured only"),
])
def test_bad_measured_input_is_one_line_exit_2_and_writes_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["profile", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("gpucost: error:") and "\n" not in err
    assert not (workdir / "profiles").exists()


def test_writing_a_measured_profile_imports_no_torch(tmp_path: Path) -> None:
    code = ("import sys; from gpucost.cli import main; "
            f"code = main({GNMT!r}); print(code, 'torch' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 False"



def test_json_output_is_the_profile_run_envelope(workdir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*GNMT, "--epochs", "3", "--dataset-size", "4500000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpucost-profile-run"
    assert doc["profile"] == Profile.load(Path(doc["path"])).to_dict()
    assert doc["profile"]["epochs"] == 3 and doc["profile"]["dataset_size"] == 4_500_000


def test_an_fp32_measurement_says_what_fp32_means_and_tf32_is_the_other_reading(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A published "fp32" is often TF32 underneath (NGC containers): the two readings of one V100
    measurement part ways on an A100, so the note that names the other one is worth its line."""
    base = ["profile", "--measured", "150", "--gpu", "V100", "--batch", "32", "--params", "110e6",
            "--name", "bert-base"]
    answers = {}
    for precision in ("fp32", "tf32"):
        assert main([*base, "--precision", precision, "--out", f"{precision}.json"]) == 0
        out = capsys.readouterr().out
        assert ("is --precision tf32" in out) == (precision == "fp32")
        assert main(["predict", "-p", f"{precision}.json", "--gpu", "A100", "--json"]) == 0
        answers[precision] = json.loads(capsys.readouterr().out)["throughput"]
    assert answers["tf32"] > 1.5 * answers["fp32"]


@pytest.mark.parametrize("name, stem", [
    ("../../escaped", "escaped"),
    ("bert-large/squad", "bert-large-squad"),
    ("runs\\v2", "runs-v2"),
    (".hidden", "hidden"),
])
def test_a_profile_name_is_a_label_its_default_file_stays_one_file_in_profiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    name: str, stem: str
) -> None:
    """The name names the workload ("GNMT v2", "bert-large/squad"); the file it gives its default
    path must neither climb out of profiles/ nor nest folders in it."""
    workdir = tmp_path / "a" / "b"
    workdir.mkdir(parents=True)
    monkeypatch.chdir(workdir)
    argv = ["profile", "--measured", "100", "--gpu", "T4", "--batch", "8", "--params", "1e6",
            "--name", name]
    assert main(argv) == 0
    assert f"wrote profiles/{stem}.json" in capsys.readouterr().out
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.json"))
    assert written == [Path("a", "b", "profiles", f"{stem}.json")]
    assert Profile.load(workdir / "profiles" / f"{stem}.json").name == name


MEASURED = ["profile", "--measured", "100", "--gpu", "T4", "--batch", "8", "--params", "1e6"]


def test_a_profile_never_replaces_a_file_that_is_not_one_unless_forced(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = workdir / "notes.txt"
    notes.write_text("important notes\n")
    assert main([*MEASURED, "--out", "notes.txt"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.txt exists and is not a gpucost profile" in err
    assert notes.read_text() == "important notes\n"
    # the default file too
    (workdir / "profiles").mkdir()
    (workdir / "profiles" / "mine.json").write_text('{"my": "data"}')
    assert main([*MEASURED, "--name", "mine"]) == 2
    assert (workdir / "profiles" / "mine.json").read_text() == '{"my": "data"}'
    capsys.readouterr()
    # an earlier profile is replaced, and --force replaces anything
    assert main([*MEASURED, "--out", "p.json"]) == 0
    assert main([*MEASURED, "--out", "p.json", "--batch", "16"]) == 0
    assert Profile.load(workdir / "p.json").batch_size == 16
    assert main([*MEASURED, "--out", "notes.txt", "--force"]) == 0
    assert Profile.load(notes).batch_size == 8


@pytest.mark.parametrize("out, message", [
    ("d", "profile file d is a folder"),
    ("nowhere/p.json", "the folder nowhere does not exist"),
])
def test_an_output_that_cannot_be_a_file_is_one_line_before_any_work(
    workdir: Path, capsys: pytest.CaptureFixture[str], out: str, message: str
) -> None:
    (workdir / "d").mkdir()
    assert main([*MEASURED, "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "internal error" not in err
    assert not list(workdir.rglob("*.json"))
