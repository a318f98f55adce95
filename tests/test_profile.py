from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucost.errors import ProfileError
from gpucost.paths import embedded_profiles_dir
from gpucost.profile import Profile, StepBreakdown, resolve_profile


def test_examples_load_and_carry_a_cited_source() -> None:
    files = sorted(p for p in embedded_profiles_dir().glob("*.json") if p.stem != "schema")
    assert len(files) >= 2
    for path in files:
        profile = Profile.load(path)
        assert profile.source, path
        assert profile.name == path.stem


def test_resnet_example_reproduces_its_published_throughput() -> None:
    profile = resolve_profile("resnet50-v100-amp")
    # lambdal/deeplearning-benchmark v1: 833.42 images/s at batch 256 on one V100 SXM2 16GB
    assert profile.throughput == pytest.approx(833.42, rel=1e-5)
    assert profile.gpu == "V100 SXM2 16GB"


def test_examples_validate_against_the_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((embedded_profiles_dir() / "schema.json").read_text())
    for path in embedded_profiles_dir().glob("*.json"):
        if path.stem != "schema":
            jsonschema.validate(json.loads(path.read_text()), schema)


def test_from_measurement_derives_step_time_and_resolves_the_gpu() -> None:
    p = Profile.from_measurement(
        gpu="Tesla V100-SXM2-16GB",
        throughput=1200.0,
        batch_size=256,
        precision="amp",
        param_count=25.6e6,
    )
    assert p.gpu == "V100 SXM2 16GB"
    assert p.step_time_s == pytest.approx(256 / 1200.0)
    assert p.throughput == pytest.approx(1200.0)
    assert p.gradient_bytes == pytest.approx(4 * 25.6e6)


@pytest.mark.parametrize("precision, bytes_per_param",
                         [("fp32", 4), ("tf32", 4), ("amp", 4), ("fp16", 2), ("bf16", 2)])
def test_a_half_precision_model_all_reduces_half_precision_gradients(
        precision: str, bytes_per_param: int) -> None:
    # fp16/bf16 is the model itself in half precision (as the memory rule and the profiler,
    # which counts its gradients' element size, read it): its gradients are 2 bytes; autocast's
    # stay fp32. A measurement said 4 whatever its precision.
    p = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=150.0, batch_size=112,
                                 precision=precision, param_count=335e6)
    assert p.gradient_bytes == pytest.approx(bytes_per_param * 335e6)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"throughput": 0.0}, "throughput"),
        ({"throughput": -5.0}, "throughput"),
        ({"batch_size": 0}, "batch_size"),
        ({"precision": "int3"}, "precision"),
    ],
)
def test_from_measurement_rejects_bad_numbers(kwargs: dict[str, object], fragment: str) -> None:
    args: dict[str, object] = {
        "gpu": "T4",
        "throughput": 100.0,
        "batch_size": 32,
        "precision": "fp32",
        "param_count": 1e6,
    }
    args.update(kwargs)
    with pytest.raises(ProfileError, match=fragment):
        Profile.from_measurement(**args)  # type: ignore[arg-type]


breakdowns = st.builds(StepBreakdown, *[st.floats(0, 10) for _ in range(5)])


@given(
    step=st.floats(1e-4, 100),
    batch=st.integers(1, 4096),
    params=st.floats(1, 1e12),
    breakdown=st.none() | breakdowns,
)
def test_round_trip_through_json(
    step: float, batch: int, params: float, breakdown: StepBreakdown | None
) -> None:
    p = Profile(
        gpu="T4",
        precision="fp16",
        batch_size=batch,
        step_time_s=step,
        param_count=params,
        breakdown=breakdown,
    )
    again = Profile.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again == p


def test_corrupt_and_incomplete_files_say_what_is_wrong(tmp_path: Path) -> None:
    truncated = tmp_path / "t.json"
    truncated.write_text('{"schema_version": 1, "gpu": "T4", "precision": "fp')
    with pytest.raises(ProfileError, match="not valid JSON"):
        Profile.load(truncated)
    missing = tmp_path / "m.json"
    missing.write_text(json.dumps({"schema_version": 1, "gpu": "T4", "precision": "fp32"}))
    with pytest.raises(ProfileError, match=r"missing field.*batch_size"):
        Profile.load(missing)
    future = tmp_path / "f.json"
    future.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ProfileError, match="schema_version 99"):
        Profile.load(future)
    unknown = tmp_path / "u.json"
    unknown.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "gpu": "T4",
                "precision": "fp32",
                "batch_size": 8,
                "step_time_s": 1.0,
                "param_count": 10,
                "colour": "blue",
            }
        )
    )
    with pytest.raises(ProfileError, match=r"unknown field.*colour"):
        Profile.load(unknown)


def test_throughput_may_stand_in_for_step_time(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "gpu": "RTX 4090",
                "precision": "amp",
                "batch_size": 64,
                "throughput": 640.0,
                "param_count": 1e7,
            }
        )
    )
    assert Profile.load(path).step_time_s == pytest.approx(0.1)


def test_unknown_example_name_lists_the_examples() -> None:
    with pytest.raises(ProfileError, match="resnet50-v100-amp"):
        resolve_profile("no-such-profile")


def test_save_is_atomic_and_loadable(tmp_path: Path) -> None:
    p = resolve_profile("bert-large-a100-fp16")
    out = p.save(tmp_path / "sub" / "copy.json")
    assert Profile.load(out) == p
    assert [f.name for f in out.parent.iterdir()] == ["copy.json"]
