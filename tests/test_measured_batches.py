"""A step measured at several batches (#20): the step's fixed and per-sample parts come from the
measurements, not from the workload's signature, when a prediction moves the batch. The Sia
traces' jobs pay 2-15x the fixed time per step their signatures say (bench/prediction_accuracy.py:
21.2 % mean error across their batches from one measured batch, 13.7 % from two)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import gpucost
from gpucost.errors import ProfileError
from gpucost.model.perf import measured_fixed_share
from gpucost.model.translate import MAX_FIXED_SHARE
from gpucost.profile import Profile

REPO = Path(__file__).resolve().parents[1]


def measured(steps: dict[int, float], gpu: str = "A100 SXM4 80GB") -> Profile:
    """A ResNet-50-sized profile whose step took ``steps[b]`` seconds at per-device batch b
    (the smallest batch is the profile's own)."""
    batch, *others = sorted(steps)
    return Profile.from_measurement(
        gpu=gpu, throughput=batch / steps[batch], batch_size=batch, precision="amp",
        param_count=25.6e6, name="resnet50", other_batches={b: b / steps[b] for b in others})


def test_two_measured_batches_set_the_line_a_prediction_follows() -> None:
    # 50 ms fixed + 1.5625 ms per sample: 100 ms at 32, 150 ms at 64
    profile = measured({32: 0.100, 64: 0.150})
    assert measured_fixed_share(profile) == pytest.approx(0.5)
    for batch, step in ((16, 0.075), (128, 0.250), (256, 0.450)):
        pred = gpucost.predict(profile, batch_size=batch)
        assert pred.step_time_s == pytest.approx(step, rel=1e-9), batch
    # another GPU keeps the measured split: the same step ratio between batches
    on_h100 = [gpucost.predict(profile, gpu="H100 SXM5 80GB", batch_size=b).step_time_s
               for b in (32, 128)]
    assert on_h100[1] / on_h100[0] == pytest.approx(2.5, rel=1e-9)


def test_the_line_is_least_squares_over_every_measured_batch() -> None:
    profile = measured({16: 0.050 + 0.016, 32: 0.050 + 0.032 + 0.004, 64: 0.050 + 0.064})
    share = measured_fixed_share(profile)
    assert share is not None and 0.6 < share < 0.85  # 0.05 of 0.066 s, give or take the noise


def test_one_measured_batch_keeps_the_modelled_split() -> None:
    one = measured({32: 0.100})
    assert measured_fixed_share(one) is None
    two = measured({32: 0.100, 64: 0.150})
    assert (gpucost.predict(one, batch_size=128).step_time_s
            != pytest.approx(gpucost.predict(two, batch_size=128).step_time_s))


def test_noisy_or_superlinear_lines_stay_physical() -> None:
    flat = measured({32: 0.100, 64: 0.095})  # noise: the step did not grow
    assert measured_fixed_share(flat) == MAX_FIXED_SHARE
    assert (gpucost.predict(flat, batch_size=128).throughput
            > gpucost.predict(flat, batch_size=64).throughput)
    steep = measured({32: 0.100, 64: 0.300})  # grew faster than the batch
    assert measured_fixed_share(steep) == 0.0
    # Least squares through three such steps passes below zero at the first batch: still 0,
    # not a line so flat that a larger batch looks nearly free.
    steeper = measured({32: 0.100, 64: 0.200, 128: 2.0})
    assert measured_fixed_share(steeper) == 0.0


def modelled_share(batch: int, step_s: float) -> float:
    """The share of a step at ``batch`` the model pays once per step, through the public
    predict of a profile measured at that batch alone: 2 - step(2b) / step(b)."""
    one = measured({batch: step_s})
    return 2.0 - (gpucost.predict(one, batch_size=2 * batch).step_time_s
                  / gpucost.predict(one).step_time_s)


def line_through(batch: int, step_s: float, other: int, share: float) -> Profile:
    """A profile measured at ``batch`` and ``other`` whose line has ``share`` fixed at
    ``batch``."""
    per_sample = (1.0 - share) * step_s / batch
    return measured({batch: step_s, other: step_s + per_sample * (other - batch)})


def test_a_close_pair_cannot_read_a_steeper_step_than_its_per_step_costs_allow() -> None:
    # Azure's NeuMF at 1025 and 1450 (150 and 160 ms): a 7 % step, 3 % noise each, read as a
    # line 0.1 below the model's share, sent 32x the batch 4.7x past its measured step.
    modelled = modelled_share(32, 0.05)
    assert modelled > 0.2  # a ResNet-50 step of 32 samples: launches and weights count
    close = line_through(32, 0.05, 45, modelled - 0.05)  # 1.4x apart: noise is +-0.12
    assert measured_fixed_share(close) == pytest.approx(modelled, rel=1e-9)
    grow = (1.0 - modelled) * 8 + modelled
    assert gpucost.predict(close, batch_size=256).step_time_s == pytest.approx(0.05 * grow)


def test_a_far_pair_that_reads_a_steeper_step_keeps_its_line() -> None:
    modelled = modelled_share(32, 0.05)
    far = line_through(32, 0.05, 256, modelled - 0.3)  # 8x apart: noise is +-0.03
    assert measured_fixed_share(far) == pytest.approx(modelled - 0.3, rel=1e-9)
    flatter = line_through(32, 0.05, 45, modelled + 0.05)  # flatter than the model: its own
    assert measured_fixed_share(flatter) == pytest.approx(modelled + 0.05, rel=1e-9)


def test_a_cpu_profile_ignores_its_cpu_batch_line() -> None:
    cpu = Profile(gpu="CPU", precision="fp32", batch_size=8, step_time_s=0.2, param_count=1e6,
                  flops_per_sample=1e9, other_batches=((16, 0.3),))
    assert measured_fixed_share(cpu) is None


def test_other_batches_round_trip_and_bad_entries_are_one_line(tmp_path: Path) -> None:
    profile = measured({32: 0.100, 64: 0.150})
    again = Profile.from_dict(json.loads(json.dumps(profile.to_dict())))
    assert again.other_batches == profile.other_batches == ((64, pytest.approx(0.15)),)
    assert "other_batches" not in measured({32: 0.1}).to_dict()  # saved files stay as they were
    body = profile.to_dict()
    for bad, words in (([[32, 0.2]], "other than batch_size"), ([[64, -1.0]], "positive number"),
                       ([[64]], "pair"), ([[64, 0.2], [64, 0.3]], "other than batch_size"),
                       ("64", "list")):
        with pytest.raises(ProfileError, match=words) as exc:
            Profile.from_dict({**body, "other_batches": bad}, origin="p.json")
        assert "\n" not in str(exc.value)
    with pytest.raises(ProfileError, match="throughput at batch 64"):
        Profile.from_measurement(gpu="A100", throughput=100.0, batch_size=32, precision="amp",
                                 param_count=1e6, other_batches={64: 0.0})


def test_also_batch_is_for_built_in_models_only(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    done = subprocess.run([sys.executable, "-m", "gpucost", "profile", str(script),
                           "--also-batch", "64"], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                             "GPUCOST_HOME": str(tmp_path / "home")},
                          check=False)
    assert done.returncode == 2, done
    assert "--also-batch works with --model only" in done.stderr
    assert done.stderr.count("\n") <= 2


@pytest.mark.slow
def test_profile_times_a_built_in_model_at_a_second_batch(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "mlp.json"
    done = subprocess.run([sys.executable, "-m", "gpucost", "profile", "--model", "mlp",
                           "--batch", "8", "--also-batch", "32", "--steps", "3", "--warmup", "1",
                           "-o", str(out)], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                               "GPUCOST_HOME": str(tmp_path / "home")}, check=False)
    assert done.returncode == 0, done
    assert "also timed: batch 32:" in done.stdout
    profile = Profile.load(out)
    assert profile.batch_size == 8 and [b for b, _ in profile.other_batches] == [32]
    assert profile.other_batches[0][1] > 0
