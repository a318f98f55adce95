"""The user's own measurements (GPUCOST_HOME/measurements.json) and `gpucost calibrate`."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest

import gpucost
from gpucost.cli import main
from gpucost.measurements import (
    fit_mix,
    read_all,
    record,
    record_on_arrival,
    source_for,
    store_path,
)
from gpucost.model import translate
from gpucost.model.perf import predict as model_predict
from gpucost.planfile import load_plan
from gpucost.profile import Profile, resolve_profile

WORKLOAD = "resnet50-v100-amp"  # an embedded example: measured on a V100 at batch 256, amp


def _keep(gpu: str, throughput: float, *, batch: int = 256, devices: int = 1,
          source: str = "profile") -> str:
    m = record(workload=WORKLOAD, gpu=gpu, precision="amp", batch_size=batch,
               device_count=devices, throughput=throughput, source=source)
    assert m is not None
    return m.id


def test_store_round_trip_is_atomic_validated_and_deduplicated(_isolated_home: Path) -> None:
    first = _keep("A100 SXM4 40GB", 2500.0)
    assert _keep("A100 SXM4 40GB", 2500.0) == first  # the same measurement is kept once
    second = _keep("T4", 250.0, source="on-arrival")
    path = store_path()
    assert path.parent == _isolated_home
    doc = json.loads(path.read_text())
    assert doc["format"] == "gpucost-measurements" and len(doc["measurements"]) == 2
    assert [m.id for m in read_all()] == [first, second]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert not list(path.parent.glob("*.tmp*"))


@pytest.mark.parametrize("damage", [
    "not json", '{"format": "other", "version": 1, "measurements": []}',
    '{"format": "gpucost-measurements", "version": 1, "measurements": [{"id": "x"}]}',
    '{"format": "gpucost-measurements", "version": 1, "measurements": [{"id": "x", '
    '"workload": "w", "gpu": "T4", "precision": "amp", "batch_size": 8, "device_count": 1, '
    '"throughput": -5, "source": "profile", "recorded_at": "2026-12-01T00:00:00Z"}]}',
])
def test_a_damaged_store_is_one_line_and_forget_all_recovers(
        damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A damaged file is moved aside (never deleted), a bad record skipped: one line each
    (issue 22 replaced the old advice, `forget --all`, which deleted every record)."""
    store_path().parent.mkdir(parents=True, exist_ok=True)
    store_path().write_text(damage)
    assert read_all() == ()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(store_path()) in err
    kept = list(store_path().parent.glob("measurements.json.damaged-*"))
    assert ("moved aside" in err and len(kept) == 1 and kept[0].read_text() == damage) or (
        "skipped record x" in err and store_path().read_text() == damage)
    assert main(["calibrate", "list"]) == 0
    # predictions ignore what is damaged
    profile = resolve_profile(WORKLOAD)
    assert gpucost.predict(profile, gpu="A100").throughput == model_predict(
        profile, gpu="A100").throughput


def test_a_measured_target_is_the_prediction() -> None:
    profile = resolve_profile(WORKLOAD)
    plain = gpucost.predict(profile, gpu="A100 SXM4 40GB").throughput
    _keep("A100 SXM4 40GB", 0.5 * plain)
    taught = gpucost.predict(profile, gpu="A100 SXM4 40GB")
    assert taught.throughput == pytest.approx(0.5 * plain)
    assert taught.profile.gpu == "A100 SXM4 40GB"
    # another precision or workload is not this workload's measurement
    other = dataclasses.replace(profile, precision="fp32")
    assert source_for(other, "A100 SXM4 40GB").method == "profile"


def test_one_measured_gpu_is_translated_from() -> None:
    """The profile's own V100 counts as a measured GPU: a newer V100 measurement twice as
    fast is the one GPU measured, and predictions elsewhere move with it."""
    profile = resolve_profile(WORKLOAD)
    before = gpucost.predict(profile, gpu="L4").throughput
    _keep(profile.gpu, 2 * profile.throughput)
    source = source_for(profile, "L4")
    assert source.method == f"translated from {profile.gpu}"
    assert gpucost.predict(profile, gpu="L4").throughput == pytest.approx(2 * before, rel=1e-6)


def test_two_gpus_fit_the_workloads_own_mix() -> None:
    """A workload whose time per sample is exactly a/flops + c/bandwidth on the model's own
    rates: measured on three GPUs, the fit predicts a fourth exactly, whatever the profile's
    family says."""
    profile = resolve_profile(WORKLOAD)
    a, c = 3.0e9, 9.0e9  # flops and bytes per sample

    def truth(gpu: str) -> float:
        r = translate.device_rates(gpu, "amp")
        return 1.0 / (a / r.flops_per_s + c / r.bytes_per_s)

    for gpu in ("T4", "A100 SXM4 40GB", profile.gpu):
        _keep(gpu, truth(gpu))
    source = source_for(profile, "H100 SXM5 80GB")
    assert source.method.startswith("compute/memory mix fitted on A100 SXM4 40GB, T4, V100")
    assert len(source.used) == 3
    assert gpucost.predict(profile, gpu="H100 SXM5 80GB").single_gpu_throughput == \
        pytest.approx(truth("H100 SXM5 80GB"), rel=1e-6)


def test_fit_mix_recovers_the_terms_and_never_goes_negative() -> None:
    points = [(f, b, 2.0 / f + 5.0 / b) for f, b in ((1e13, 1e11), (5e13, 9e11), (2e14, 3e12))]
    assert fit_mix(points) == pytest.approx((2.0, 5.0))
    # a memory-bound workload: the compute term is clamped at zero, not negative
    bound = [(f, b, 4.0 / b) for f, b in ((1e13, 1e11), (5e13, 9e11), (2e14, 3e12))]
    a, c = fit_mix(bound)
    assert a >= 0.0 and c == pytest.approx(4.0, rel=1e-6)


def test_multi_gpu_and_cpu_measurements_are_listed_not_used() -> None:
    profile = resolve_profile(WORKLOAD)
    _keep("A100 SXM4 40GB", 20000.0, devices=8, source="on-arrival")
    record(workload=WORKLOAD, gpu="CPU", precision="amp", batch_size=256, device_count=1,
           throughput=5.0, source="on-arrival")
    assert len(read_all()) == 2
    assert source_for(profile, "A100 SXM4 40GB").method == "profile"


def test_only_profiler_measured_profiles_are_kept(tmp_path: Path) -> None:
    published = Profile.from_measurement(gpu="V100", throughput=1000.0, batch_size=64,
                                         precision="amp", param_count=25e6, name="net")
    published.save(tmp_path / "a.json")
    assert read_all() == ()  # a published number is not the user's run
    measured = dataclasses.replace(published, steps_measured=50,
                                   measured_at="2026-12-01T10:00:00+00:00")
    measured.save(tmp_path / "b.json")
    dataclasses.replace(measured, partial=True, name="cut").save(tmp_path / "c.json")
    kept = read_all()
    assert [(m.workload, m.gpu, m.throughput, m.source) for m in kept] == [
        ("net", "V100 SXM2 16GB", 1000.0, "profile")]


def test_on_arrival_throughput_is_kept_under_the_plans_profile_name() -> None:
    plan = load_plan(Path(__file__).resolve().parents[1] / "examples" / "plan.toml")
    plan = dataclasses.replace(plan, workload=dataclasses.replace(
        plan.workload, profile="profiles/my-net.json", precision="amp", batch_size=64))
    kept = record_on_arrival(plan, 321.0)
    assert kept is not None
    assert (kept.workload, kept.gpu, kept.batch_size, kept.source, kept.throughput) == (
        "my-net", plan.offer.gpu, 64, "on-arrival", 321.0)
    assert kept.device_count == round(plan.offer.gpu_count) * plan.offer.nodes
    no_batch = dataclasses.replace(plan, workload=dataclasses.replace(plan.workload,
                                                                      batch_size=None))
    assert record_on_arrival(no_batch, 1.0) is None


def test_read_only_home_keeps_commands_working(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("GPUCOST_HOME", str(blocker / "home"))  # cannot be created
    assert record(workload="w", gpu="T4", precision="amp", batch_size=8, device_count=1,
                  throughput=1.0, source="profile") is None
    assert "measurement not kept" in capsys.readouterr().err
    assert main(["calibrate", "list"]) == 0
    assert "no measurements stored" in capsys.readouterr().out
    assert main(["predict", "--gpu", "L4"]) == 0
    assert "measurements  profile: none stored" in capsys.readouterr().out


def test_cli_lists_forgets_and_predict_names_what_it_used(
        capsys: pytest.CaptureFixture[str]) -> None:
    keep = _keep("A100 SXM4 40GB", 2500.0)
    drop = _keep("T4", 250.0, source="on-arrival")
    assert main(["calibrate", "list"]) == 0
    out = capsys.readouterr().out
    assert WORKLOAD in out and keep in out and drop in out
    assert main(["predict", "--gpu", "A100", "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["measurements"]["method"] == "measured on the target"
    assert body["measurements"]["used"][0].startswith(keep)
    assert body["throughput"] == pytest.approx(2500.0)
    assert main(["calibrate", "forget", drop, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpucost-calibrate-forget" and doc["forgotten"][0]["id"] == drop
    assert main(["calibrate", "list", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [m["id"] for m in doc["measurements"]] == [keep]
    for bad in (["calibrate", "forget", "nope"], ["calibrate", "forget"],
                ["calibrate", "forget", keep, "--all"]):
        assert main(bad) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_real_run_keeps_its_on_arrival_throughput(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A local run of the tiny example: the executor's on-arrival check stores what it
    measured under the plan's profile name."""
    import tomllib

    import tomli_w
    from test_executor_local import write_plan

    path = write_plan(tmp_path, epochs=1, policy="stop")
    plan = tomllib.loads(path.read_text())
    plan["workload"].update(profile="tiny-mlp", precision="fp32", batch_size=32)
    path.write_text(tomli_w.dumps(plan))
    assert main(["launch", str(path)]) == 0
    assert capsys.readouterr().out.split()[1] == "succeeded"
    kept = [m for m in read_all() if m.source == "on-arrival"]
    assert [(m.workload, m.gpu, m.precision, m.batch_size) for m in kept] == [
        ("tiny-mlp", "CPU", "fp32", 32)]
    assert kept[0].throughput > 0


def test_compare_ranks_with_the_workloads_measurements() -> None:
    import datetime as dt

    from gpucost.planning.ranking import rank
    from gpucost.planning.request import Job, Request
    from gpucost.pricing.snapshot import Offers, Snapshot

    fetched = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    offers = Offers.from_records([
        {"provider": "lambda", "region": "r", "instance_type": "gpu_1x_a100_sxm4",
         "gpu": "A100 SXM4 40GB", "gpu_count": 1, "gpu_memory_gb": 40, "price_hr": 1.29},
        {"provider": "aws", "region": "r", "instance_type": "g4dn.xlarge", "gpu": "T4",
         "gpu_count": 1, "gpu_memory_gb": 16, "price_hr": 0.53}])
    snapshots = [Snapshot(source="t", fetched_at=fetched, offers=offers)]
    profile = resolve_profile(WORKLOAD)

    def throughputs() -> dict[str, float]:
        r = rank(Request(profile, Job(samples=1e6, description="1M"), tuple(snapshots),
                         now=fetched))
        return {str(g): float(t) for g, t in zip(r.plans.gpu, r.plans.throughput, strict=True)}

    before = throughputs()
    _keep("A100 SXM4 40GB", 700.0)  # measured: far slower than the model's guess
    after = throughputs()
    assert after["A100 SXM4 40GB"] == pytest.approx(700.0)
    assert before["A100 SXM4 40GB"] > 1000.0
    # the T4 is now predicted from the fitted mix of the V100 profile and the A100 measurement
    assert after["T4"] != pytest.approx(before["T4"])


def test_a_mix_fitted_prediction_carries_the_nearest_measured_gpus_band() -> None:
    """A GPU predicted from a mix fitted on other measured GPUs is a prediction, not a
    measurement on that GPU: its band is the translation band from the nearest measured GPU
    (it was "the measurement itself", zero wide, in compare and predict)."""
    profile = resolve_profile(WORKLOAD)
    _keep("A100 SXM4 80GB", 1500.0)
    source = source_for(profile, "H100 SXM5 80GB")
    assert source.method.startswith("compute/memory mix fitted on")
    assert source.profile.band_gpu in ("A100 SXM4 80GB", profile.gpu)
    band = gpucost.predict(profile, gpu="H100 SXM5 80GB").band
    assert band.low < 1.0 < band.high
    assert "held-out pairs" in band.key
    # measured on the target: that measurement, no band
    assert gpucost.predict(profile, gpu="A100 SXM4 80GB").band.low == 1.0
    # a derived profile's band_gpu is not written into profile files
    assert "band_gpu" not in resolve_profile(WORKLOAD).to_dict()
    assert Profile.from_dict(source.profile.to_dict()).band_gpu == source.profile.band_gpu


def test_calibrate_list_shows_prediction_against_measured_and_the_band_now(
        capsys: pytest.CaptureFixture[str]) -> None:
    import datetime as dt

    from gpucost.measurements import learning

    profile = resolve_profile(WORKLOAD)
    day = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    before_any = gpucost.predict(profile, gpu="A100 SXM4 80GB")
    for i, (gpu, rate) in enumerate((("A100 SXM4 80GB", 1500.0), ("H100 SXM5 80GB", 3000.0))):
        assert record(workload=WORKLOAD, gpu=gpu, precision="amp", batch_size=256,
                      device_count=1, throughput=rate, source="on-arrival",
                      now=day + dt.timedelta(days=i)) is not None
    a100, h100 = learning()
    # the first GPU was predicted from the profile alone; the second from the profile and the
    # first measurement (so that prediction differs from the profile-only one)
    assert a100.method == "profile"
    assert a100.predicted == pytest.approx(before_any.throughput)
    assert a100.error_pct == pytest.approx((1500.0 / before_any.throughput - 1) * 100)
    assert h100.method.startswith("translated from") or h100.method.startswith("compute/memory")
    assert h100.band_before is not None and h100.band_before.low < 1.0 < h100.band_before.high
    low, high = h100.band_before.low * h100.predicted, h100.band_before.high * h100.predicted
    assert h100.inside_before == (low <= 3000.0 <= high)
    # now each GPU is measured: a prediction there is the measurement, its band narrowed to none
    for x in (a100, h100):
        assert x.band_now is not None and x.band_now.low == x.band_now.high == 1.0
        assert x.predicted_now == pytest.approx(x.measurement.throughput)

    assert main(["calibrate", "list"]) == 0
    text = capsys.readouterr().out
    assert "on 1 x H100 SXM5 80GB (amp, batch 256): measured 3,000.0 samples/s; predicted " \
           f"before it {h100.predicted:,.1f}" in text
    assert "band now: narrowed to the measurement itself" in text
    assert main(["calibrate", "list", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["gpu"]: r for r in doc["learning"]}
    assert rows["A100 SXM4 80GB"]["predicted_before"] == pytest.approx(before_any.throughput)
    assert rows["H100 SXM5 80GB"]["band_now"]["low"] == 1.0


def test_calibrate_list_says_when_a_workloads_profile_is_not_found(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    profile = resolve_profile(WORKLOAD)
    mine = dataclasses.replace(profile, name="my-model")
    assert record(workload="my-model", gpu="A100 SXM4 80GB", precision="amp", batch_size=256,
                  device_count=1, throughput=1500.0, source="on-arrival") is not None
    assert main(["calibrate", "list"]) == 0
    assert "profile 'my-model' not found: give it with --profile" in capsys.readouterr().out
    path = mine.save(tmp_path / "my-model.json")
    assert main(["calibrate", "list", "--profile", str(path)]) == 0
    assert "predicted before it" in capsys.readouterr().out
