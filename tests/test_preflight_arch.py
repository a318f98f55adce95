"""The CUDA-architecture check against arch lists recorded from real torch builds."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucost.catalog import all_gpus, get_gpu
from gpucost.preflight.arch import (
    KNOWN_BUILDS,
    builds_for,
    installed_build,
    parse_torch_version,
    pinned_build,
    runs_on,
)

# torch.cuda.get_arch_list() as printed by real installs (the sources are in KNOWN_BUILDS).
RECORDED = {
    "2.11+cu126": ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
    "2.11+cu128": ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    "2.10+cu128": ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
    "2.7+cu124": ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"),
}


def test_recorded_rows_hold_the_recorded_lists() -> None:
    for key, archs in RECORDED.items():
        assert KNOWN_BUILDS[key].archs == archs
        assert KNOWN_BUILDS[key].basis == "recorded"


# (build, GPU, runs?, the entry that serves it): the failures people actually hit
CASES = [
    ("2.11+cu128", "V100 SXM2 16GB", False, None),  # pytorch#182250: cu128 dropped sm_70
    ("2.10+cu128", "V100 SXM2 16GB", True, "sm_70"),  # ... which 2.10 still had
    ("2.11+cu126", "V100 SXM2 16GB", True, "sm_70"),
    ("2.11+cu126", "RTX 5090", False, None),  # Blackwell needs sm_120 (cu128+)
    ("2.7+cu124", "RTX 5090", False, None),  # pytorch#167244, verbatim
    ("2.11+cu128", "RTX 5090", True, "sm_120"),
    ("2.11+cu128", "T4", True, "sm_75"),
    ("2.11+cu128", "GTX 1080 Ti", False, None),  # Pascal gone from cu128
    ("2.11+cu126", "GTX 1080 Ti", True, "sm_60"),  # sm_60 cubin runs on 6.1
    ("2.11+cu126", "RTX 4090", True, "sm_86"),  # no sm_89 in the list: 8.6 code runs on 8.9
    ("2.11+cu126", "H100 SXM5 80GB", True, "sm_90"),
    ("2.11+cu126", "B200", False, None),
    ("2.11+cu128", "B300", True, "sm_100"),  # 10.3 runs 10.0 code
    ("2.11+cu126", "K80", False, None),
    ("2.0+cu118", "K80", True, "sm_37"),
    ("2.0+cu117", "H100 SXM5 80GB", False, None),  # no sm_90 before CUDA 11.8
]


@pytest.mark.parametrize(("build", "gpu", "runs", "via"), CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_known_builds_against_gpus(build: str, gpu: str, runs: bool, via: str | None) -> None:
    cc = get_gpu(gpu).compute_capability
    assert cc is not None
    verdict = runs_on(KNOWN_BUILDS[build].archs, cc)
    assert verdict.ok is runs
    assert verdict.via == via
    if not runs:
        assert f"sm_{cc.replace('.', '')}" in verdict.message


def test_ptx_and_arch_specific_cubins() -> None:
    assert runs_on(("compute_80",), "9.0").via == "compute_80"  # PTX JIT-compiles upwards
    assert "JIT" in runs_on(("compute_80",), "9.0").message
    assert not runs_on(("compute_90",), "8.6").ok  # ... never downwards
    assert runs_on(("sm_90a",), "9.0").ok
    assert not runs_on(("sm_100a",), "10.3").ok  # "a": that exact capability only
    assert runs_on(("sm_100f",), "10.3").ok  # "f": the whole family
    assert not runs_on(("sm_80",), "7.5").ok  # newer code never runs on older GPUs
    assert not runs_on((), "8.0").ok


@pytest.mark.parametrize(("text", "parsed"), [
    ("2.5.1+cu124", ("2.5", "cu124")),
    ("torch==2.8.0", ("2.8", None)),
    ("2.7.0.dev20250310+cu124", ("2.7", "cu124")),
    ("2.13.0+cpu", ("2.13", "cpu")),
    ("2.10", ("2.10", None)),
])
def test_parse_torch_version(text: str, parsed: tuple[str, str | None]) -> None:
    assert parse_torch_version(text) == parsed


def test_parse_torch_version_rejects_junk() -> None:
    with pytest.raises(ValueError):
        parse_torch_version("latest")


def test_pinned_build() -> None:
    default = pinned_build("2.8.0")  # PyPI's default CUDA line for 2.8
    assert default is not None and default.version == "2.8+cu128"
    assert pinned_build("2.5.1+cu124") is KNOWN_BUILDS["2.5+cu124"]
    assert pinned_build("2.13.0+cu130") is None  # not in the table: the check says so
    assert pinned_build("2.5.1+rocm6.2") is None
    assert pinned_build("1.13.1") is None


def test_table_rows_are_well_formed() -> None:
    for key, build in KNOWN_BUILDS.items():
        assert build.version == key
        assert build.basis in ("recorded", "build-script", "inferred")
        assert build.source
        numbers = [int(re.fullmatch(r"(?:sm|compute)_(\d+)", a).group(1))  # type: ignore[union-attr]
                   for a in build.archs]
        assert numbers == sorted(numbers), key


def test_every_nvidia_gpu_in_the_catalog_has_a_build() -> None:
    for spec in all_gpus():
        if spec.compute_capability:
            assert builds_for(spec.compute_capability), spec.name


def test_builds_for_is_newest_first_and_correct() -> None:
    found = builds_for("7.0")
    assert found[0] == "2.11+cu126" and "2.11+cu128" not in found
    assert all(runs_on(KNOWN_BUILDS[k].archs, "7.0").ok for k in found)


def test_installed_build_is_the_real_torch() -> None:
    torch = pytest.importorskip("torch")
    build = installed_build()
    assert build is not None
    assert build.version == torch.__version__
    assert build.archs == tuple(torch.cuda.get_arch_list())
    assert build.basis == "installed"


ARCHS = st.sampled_from(sorted({a for b in KNOWN_BUILDS.values() for a in b.archs}
                               | {"compute_70", "compute_90", "sm_90a", "sm_100f"}))
CCS = st.sampled_from(sorted({s.compute_capability for s in all_gpus()
                              if s.compute_capability}))


@given(st.lists(ARCHS, max_size=8), st.lists(ARCHS, max_size=4), CCS)
def test_more_archs_never_break_a_build(base: list[str], extra: list[str], cc: str) -> None:
    if runs_on(tuple(base), cc).ok:
        assert runs_on(tuple(base + extra), cc).ok


@given(st.lists(ARCHS, max_size=8), CCS)
def test_ptx_at_or_below_the_gpu_always_runs(base: list[str], cc: str) -> None:
    major, minor = cc.split(".")
    assert runs_on((*base, f"compute_{major}{minor}"), cc).ok
