"""The GPU catalog: data invariants, name resolution, reference-data checks, `gpucost gpus`."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from goldens import assert_golden
from hypothesis import given
from hypothesis import strategies as st

from gpucost.catalog import (
    FAMILY_DEFAULTS,
    all_entries,
    all_gpus,
    get_entry,
    get_gpu,
    is_gpu_name,
    resolve_gpu_name,
    suggest,
    try_resolve_gpu_name,
)
from gpucost.catalog import names as names_module
from gpucost.catalog.table import CSV_PATH, CatalogFileError, read_entries
from gpucost.cli import main
from gpucost.errors import UnknownGpuError

CANONICAL = {spec.name for spec in all_gpus()}

# What real sources write -> what it must resolve to.
SPELLINGS: dict[str, str] = {
    # NVML (nvidia-smi --query-gpu=name)
    "NVIDIA GeForce RTX 4090": "RTX 4090",
    "Tesla T4": "T4",
    "Tesla V100-SXM2-16GB": "V100 SXM2 16GB",
    "Tesla V100-SXM2-32GB": "V100 SXM2 32GB",
    "Tesla V100-PCIE-32GB": "V100 PCIe 32GB",
    "Tesla V100S-PCIE-32GB": "V100S PCIe 32GB",
    "A100-SXM4-80GB": "A100 SXM4 80GB",
    "NVIDIA A100-SXM4-40GB": "A100 SXM4 40GB",
    "NVIDIA A100 80GB PCIe": "A100 PCIe 80GB",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe 40GB",
    "H100 80GB HBM3": "H100 SXM5 80GB",
    "NVIDIA H100 80GB HBM3": "H100 SXM5 80GB",
    "NVIDIA H100 PCIe": "H100 PCIe 80GB",
    "NVIDIA H100 NVL": "H100 NVL 94GB",
    "NVIDIA H200": "H200 SXM 141GB",
    "NVIDIA GH200 480GB": "GH200 96GB",
    "NVIDIA GH200 144G HBM3e": "GH200 144GB",
    "NVIDIA B200": "B200",
    "NVIDIA RTX A6000": "RTX A6000",
    "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX PRO 6000",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "RTX PRO 6000",
    "Quadro RTX 8000": "Quadro RTX 8000",
    "TITAN RTX": "Titan RTX",
    "NVIDIA GeForce GTX 1080 Ti": "GTX 1080 Ti",
    "Tesla P100-PCIE-16GB": "P100 PCIe 16GB",
    "Tesla K80": "K80",
    "NVIDIA A10G": "A10G",
    "NVIDIA L40S": "L40S",
    "AMD Instinct MI300X": "MI300X",
    # other separators and case
    "RTX_4090": "RTX 4090",
    "A100 SXM4 40GB": "A100 SXM4 40GB",
    "a100-80gb": "A100 SXM4 80GB",
    "rtx 3090": "RTX 3090",
    # cloud catalogs (SkyPilot, AWS, GCP, Vast, RunPod, Lambda, Shadeform)
    "A100-80GB": "A100 SXM4 80GB",
    "A100-80GB-SXM": "A100 SXM4 80GB",
    "H100-SXM": "H100 SXM5 80GB",
    "H100-MEGA": "H100 SXM5 80GB",
    "H100-NVLINK": "H100 SXM5 80GB",
    "H100-NVL": "H100 NVL 94GB",
    "H200-SXM": "H200 SXM 141GB",
    "RTX4090": "RTX 4090",
    "RTX 6000Ada": "RTX 6000 Ada",
    "RTX6000-Ada": "RTX 6000 Ada",
    "RTX-6000-Ada": "RTX 6000 Ada",
    "RTX6000": "Quadro RTX 6000",
    "A6000": "RTX A6000",
    "RTXA6000": "RTX A6000",
    "A5000": "RTX A5000",
    "A4000": "RTX A4000",
    "RTXA4500": "RTX A4500",
    "RTXA2000": "RTX A2000",
    "RTXPRO6000": "RTX PRO 6000",
    "RTXPro6000": "RTX PRO 6000",
    "RTX-PRO-6000": "RTX PRO 6000",
    "RTXPRO6000S": "RTX PRO 6000",
    "RTXPRO6000WS": "RTX PRO 6000",
    "RTXPRO6000-WK": "RTX PRO 6000",
    "RTX PRO Server 6000": "RTX PRO 6000",
    "RTXPRO4500-SE": "RTX PRO 4500",
    "RTX2000-Ada": "RTX 2000 Ada",
    "RTX4000-Ada": "RTX 4000 Ada",
    "GTX1660S": "GTX 1660 Super",
    "V100-32GB": "V100 SXM2 32GB",
    "T4g": "T4",
    "nvidia-tesla-a100": "A100 SXM4 40GB",
    "nvidia-a100-80gb": "A100 SXM4 80GB",
    "nvidia-h100-mega-80gb": "H100 SXM5 80GB",
    "nvidia-h200-141gb": "H200 SXM 141GB",
    "nvidia-tesla-v100": "V100 SXM2 16GB",
    "nvidia-tesla-t4": "T4",
    "nvidia-l4": "L4",
    "gpu_1x_a100_sxm4": "A100 SXM4 40GB",
    "gpu_8x_a100_80gb_sxm4": "A100 SXM4 80GB",
    "gpu_1x_h100_pcie": "H100 PCIe 80GB",
    "gpu_8x_h100_sxm5": "H100 SXM5 80GB",
    "gpu_8x_b200_sxm6": "B200",
    "gpu_1x_rtx6000": "Quadro RTX 6000",
    "Radeon MI25": "MI25",
    "Radeon Pro V520": "Radeon Pro V520",
    # provider APIs (../shared/data/api-samples): Lambda, RunPod, Vast, GCP SKUs
    "A100 (40 GB SXM4)": "A100 SXM4 40GB",
    "A100 (80 GB SXM4)": "A100 SXM4 80GB",
    "H100 (80 GB PCIe)": "H100 PCIe 80GB",
    "H100 (80 GB SXM5)": "H100 SXM5 80GB",
    "GH200 (96 GB)": "GH200 96GB",
    "A10 (24 GB PCIe)": "A10",
    "AMD Instinct MI300X OAM": "MI300X",
    "A100 80GB": "A100 SXM4 80GB",
    "A100 PCIe": "A100 PCIe 40GB",
    "A100 SXM4": "A100 SXM4 40GB",
    "H100 SXM": "H100 SXM5 80GB",
    "H200 SXM": "H200 SXM 141GB",
    "nvidia-l4-vws": "L4",
    "nvidia-tesla-t4-vws": "T4",
    "nvidia-gb200": "GB200",
    # marketplace GeForce spellings
    "RTX 4080S": "RTX 4080 Super",
    "RTX 4080 SUPER": "RTX 4080 Super",
    "RTX 4060 Ti": "RTX 4060 Ti 8GB",
    "RTX 4060 Ti 16GB": "RTX 4060 Ti 16GB",
    "RTX 3090 Ti": "RTX 3090 Ti",
    # benchmark-log spellings
    "T4 16GB": "T4",
    "V100 32GB": "V100 SXM2 32GB",
    "B200 192GB": "B200",
    "GH200 80GB": "GH200 96GB",
    # GPUs of public training benchmarks and studies added for #13 (NVML / ROCm / cloud names)
    "NVIDIA GeForce GTX 1070": "GTX 1070",
    "GTX 1070 Ti": "GTX 1070 Ti",
    "NVIDIA GeForce GTX 1080": "GTX 1080",
    "Tesla P4": "P4",
    "nvidia-tesla-p4": "P4",
    "Tesla P40": "P40",
    "NVIDIA TITAN V": "Titan V",
    "NVIDIA TITAN Xp": "Titan Xp",
    "TITAN Xp COLLECTORS EDITION": "Titan Xp",
    "NVIDIA GeForce RTX 2060": "RTX 2060",
    "GeForce RTX 2070": "RTX 2070",
    "NVIDIA GeForce RTX 2080": "RTX 2080",
    "NVIDIA GeForce RTX 2080 SUPER": "RTX 2080 Super",
    "RTX 2080S": "RTX 2080 Super",
    "Quadro RTX 4000": "Quadro RTX 4000",
    "Q RTX 4000": "Quadro RTX 4000",
    "AMD Instinct MI100": "MI100",
    "AMD Instinct MI210": "MI210",
    "AMD Instinct MI250X": "MI250X",
    "MI250X 128GB": "MI250X",
    "AMD Instinct MI250X/MI250": "MI250",
    "AMD Instinct MI250": "MI250",
    "AMD Instinct MI325X": "MI325X",
    "AMD Instinct MI355X": "MI355X",
}

# The brief's minimum coverage: each must resolve to a row whose name starts with the key.
REQUIRED = (
    "T4", "L4", "A10", "A10G", "L40", "L40S", "A40", "RTX A6000", "RTX 6000 Ada", "RTX 3090",
    "RTX 4090", "RTX 5090", "V100 SXM2 16GB", "V100 SXM2 32GB", "V100 PCIe 16GB",
    "V100 PCIe 32GB", "A100 PCIe 40GB", "A100 PCIe 80GB", "A100 SXM4 40GB", "A100 SXM4 80GB",
    "H100 PCIe", "H100 SXM5", "H100 NVL", "H200", "GH200", "B200", "MI300X", "RTX 2080 Ti",
    "RTX 3070", "RTX 3080", "Titan RTX", "Quadro RTX 5000", "Quadro RTX 6000", "Quadro RTX 8000",
    "RTX A4000", "RTX A4500", "RTX A5000", "RTX A5500", "GTX 1080 Ti", "P100",
    # #13: the heterogeneous-scaling study's GPUs and AMD's training accelerators
    "GTX 1070", "P4", "MI100", "MI210", "MI250", "MI250X", "MI325X",
)

NON_GPUS = (
    "tpu-v5litepod-8", "tpu-v3-8", "tpu-v6e", "Inferentia", "Inferentia2", "Trainium",
    "Trainium2", "Gaudi HL-205", "GAUDI2", "Virtex UltraScale (VU9P)",
    "Virtex UltraScale+ (VU47P)",
)

LAPTOP_MARKERS = ("laptop", "max-q", "mobile")


@pytest.mark.parametrize(("spelling", "expected"), sorted(SPELLINGS.items()))
def test_real_world_spellings_resolve(spelling: str, expected: str) -> None:
    assert resolve_gpu_name(spelling) == expected
    assert get_gpu(spelling).name == expected


@pytest.mark.parametrize("name", REQUIRED)
def test_required_gpus_are_in_the_catalog(name: str) -> None:
    assert resolve_gpu_name(name).startswith(name)


def test_catalog_size_and_unique_names() -> None:
    names = [spec.name for spec in all_gpus()]
    assert len(names) >= 30
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_canonical_names_resolve_to_themselves(name: str) -> None:
    assert resolve_gpu_name(name) == name
    assert resolve_gpu_name(name.upper()) == name
    for alias in get_gpu(name).aliases:
        assert resolve_gpu_name(alias) == name


# --- ambiguity: the documented family defaults -------------------------------------------------

@pytest.mark.parametrize(("spelling", "expected"), [
    ("A100", "A100 SXM4 40GB"),
    ("H100", "H100 SXM5 80GB"),
    ("V100", "V100 SXM2 16GB"),
    ("P100", "P100 PCIe 16GB"),
    ("H200", "H200 SXM 141GB"),
    ("GH200", "GH200 96GB"),
    ("A800", "A800 SXM4 80GB"),
    ("RTX 4060 Ti", "RTX 4060 Ti 8GB"),
    # a stated memory keeps the default's form factor
    ("A100 80GB", "A100 SXM4 80GB"),
    ("V100 32GB", "V100 SXM2 32GB"),
    ("H100 94GB", "H100 NVL 94GB"),
    # a stated form factor keeps the default's memory
    ("A100 PCIe", "A100 PCIe 40GB"),
    ("V100 PCIe", "V100 PCIe 16GB"),
    ("H200 NVL", "H200 NVL 141GB"),
    ("P100 SXM2", "P100 SXM2 16GB"),
])
def test_family_defaults(spelling: str, expected: str) -> None:
    assert resolve_gpu_name(spelling) == expected


def test_every_multi_variant_family_has_a_default_inside_it() -> None:
    index = names_module._index()
    for model, members in index.families.items():
        if len(members) > 1:
            assert FAMILY_DEFAULTS[model] in members, model
    for model, default in FAMILY_DEFAULTS.items():
        assert default in index.families[model]


def test_memory_hint_picks_a_variant_but_never_rejects() -> None:
    assert resolve_gpu_name("A100", memory_gb=85.9) == "A100 SXM4 80GB"  # 80 GiB in GB
    assert resolve_gpu_name("V100", memory_gb=32) == "V100 SXM2 32GB"
    assert resolve_gpu_name("H100", memory_gb=94) == "H100 NVL 94GB"
    # Vast reports the machine's total for a 2x RTX 4090 offer: still an RTX 4090
    assert resolve_gpu_name("RTX4090", memory_gb=49.1) == "RTX 4090"
    # a memory size in the name itself wins over the hint
    assert resolve_gpu_name("A100-80GB", memory_gb=40) == "A100 SXM4 80GB"
    assert resolve_gpu_name("GH200 80GB", memory_gb=103.1) == "GH200 96GB"
    # RunPod's GpuInfo names the board; its memory figure (80 for 80 GB) is a usable hint
    assert resolve_gpu_name("A100 PCIe", memory_gb=80) == "A100 PCIe 80GB"
    assert resolve_gpu_name("A100 SXM", memory_gb=80) == "A100 SXM4 80GB"
    # price tables write NaN or 0 for "not reported"
    assert resolve_gpu_name("A100", memory_gb=float("nan")) == "A100 SXM4 40GB"
    assert resolve_gpu_name("V100", memory_gb=0) == "V100 SXM2 16GB"


def test_memory_stated_in_the_name_must_exist() -> None:
    with pytest.raises(UnknownGpuError) as caught:
        resolve_gpu_name("A100 64GB")
    # the family's variants, nearest memory first
    assert caught.value.suggestions == ("A100 SXM4 80GB", "A100 PCIe 80GB", "A100 SXM4 40GB")
    with pytest.raises(UnknownGpuError):
        resolve_gpu_name("L4 SXM")


# --- unknown names and non-GPU accelerators ----------------------------------------------------

@pytest.mark.parametrize(("name", "expected_first"), [
    ("RTX 4099", "RTX 4090"),
    ("A1000", "A100 SXM4 40GB"),
    ("L40X", "L40"),
])
def test_unknown_names_get_up_to_three_suggestions(name: str, expected_first: str) -> None:
    with pytest.raises(UnknownGpuError) as caught:
        resolve_gpu_name(name)
    err = caught.value
    assert 1 <= len(err.suggestions) <= 3
    assert expected_first in err.suggestions
    assert set(err.suggestions) <= CANONICAL
    assert "\n" not in str(err) and repr(name) in str(err)
    assert err.exit_code == 2
    assert try_resolve_gpu_name(name) is None


@pytest.mark.parametrize("name", [*NON_GPUS, "RTX 3080 Laptop", "RTX 2070 Max-Q (laptop)", "",
                                  "---", "8x"])
def test_non_gpus_and_laptops_do_not_resolve(name: str) -> None:
    assert try_resolve_gpu_name(name) is None
    assert not is_gpu_name(name)
    with pytest.raises(UnknownGpuError):
        resolve_gpu_name(name)


@pytest.mark.parametrize("name", NON_GPUS)
def test_non_gpus_get_no_gpu_suggestions(name: str) -> None:
    assert suggest(name) == ()


def test_repeated_resolution_is_served_from_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    first = resolve_gpu_name("NVIDIA GeForce RTX 3090")
    unknown = try_resolve_gpu_name("no such gpu 1234")

    def fail(name: str) -> None:
        raise AssertionError(f"{name!r} was parsed again")

    monkeypatch.setattr(names_module, "_parse", fail)
    assert resolve_gpu_name("NVIDIA GeForce RTX 3090") == first == "RTX 3090"
    assert try_resolve_gpu_name("no such gpu 1234") is unknown is None


# --- property tests ----------------------------------------------------------------------------

_KNOWN_SPELLINGS = sorted({*SPELLINGS, *CANONICAL,
                           *(a for s in all_gpus() for a in s.aliases)})


@st.composite
def _respelled(draw: st.DrawFn) -> str:
    """A known spelling with random letter case and separators, as sources vary them."""
    base = draw(st.sampled_from(_KNOWN_SPELLINGS))
    separator = draw(st.sampled_from([" ", "-", "_", "  ", " - "]))
    flips = draw(st.lists(st.booleans(), min_size=len(base), max_size=len(base)))
    text = "".join(c.swapcase() if flip else c for c, flip in zip(base, flips, strict=True))
    return re.sub(r"[ _-]+", separator, text)


@given(_respelled())
def test_respelled_known_names_resolve_idempotently(spelling: str) -> None:
    resolved = resolve_gpu_name(spelling)
    assert resolved in CANONICAL
    assert resolve_gpu_name(resolved) == resolved
    assert resolve_gpu_name(spelling.upper()) == resolved == resolve_gpu_name(spelling.lower())


@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30))
def test_any_text_resolves_to_a_canonical_name_or_nothing(text: str) -> None:
    resolved = try_resolve_gpu_name(text)
    assert resolved is None or resolved in CANONICAL
    assert try_resolve_gpu_name(text.upper()) == resolved == try_resolve_gpu_name(text.lower())
    if resolved is not None:
        assert try_resolve_gpu_name(resolved) == resolved


# --- data invariants ---------------------------------------------------------------------------

_CC_BY_ARCH = {  # compute capabilities each architecture can have
    "Kepler": {"3.7"}, "Maxwell": {"5.2"}, "Pascal": {"6.0", "6.1"}, "Volta": {"7.0"},
    "Turing": {"7.5"}, "Ampere": {"8.0", "8.6"}, "Ada": {"8.9"}, "Hopper": {"9.0"},
    "Blackwell": {"10.0", "10.3", "12.0"},
}


@pytest.mark.parametrize("entry", all_entries(), ids=lambda e: e.spec.name)
def test_row_invariants(entry: object) -> None:
    from gpucost.catalog import CatalogEntry

    assert isinstance(entry, CatalogEntry)
    spec = entry.spec
    for value in (spec.memory_gb, spec.mem_bw_gbs, spec.fp32_tflops, spec.pcie_gbs, spec.tdp_w):
        assert value > 0
    assert spec.nvlink_gbs >= 0
    tensor = [v for v in (spec.tf32_tflops, spec.fp16_tflops, spec.bf16_tflops) if v is not None]
    assert all(v > 0 for v in tensor)
    if spec.tf32_tflops is not None and spec.fp16_tflops is not None:
        assert spec.tf32_tflops <= spec.fp16_tflops
    if spec.fp16_tflops is not None:
        assert spec.fp16_tflops >= spec.fp32_tflops  # a tensor unit is never slower than SIMT
        assert entry.fp16_acc16_tflops is not None
    if spec.bf16_tflops is not None:
        assert spec.fp16_tflops is not None and spec.bf16_tflops <= spec.fp16_tflops
    assert spec.tflops("amp") >= spec.tflops("fp32")
    if entry.mamf_bf16_tflops is not None:  # measured can't beat the datasheet peak
        assert 0 < entry.mamf_bf16_tflops < spec.tflops("bf16")
    assert spec.source.strip() and spec.confidence in {"high", "medium", "low"}
    if spec.vendor == "NVIDIA":
        assert spec.compute_capability is not None
        assert re.fullmatch(r"\d{1,2}\.\d", spec.compute_capability)
        assert spec.compute_capability in _CC_BY_ARCH[spec.arch]
        if spec.compute_capability_tuple is not None and spec.compute_capability_tuple >= (8, 0):
            assert spec.tf32_tflops is not None and spec.bf16_tflops is not None
    else:
        assert spec.vendor == "AMD" and spec.compute_capability is None
    assert spec.name.casefold() not in {a.casefold() for a in spec.aliases}


def test_geforce_runs_fp32_accumulate_at_half_rate() -> None:
    """GeForce tensor math with fp32 accumulate runs at half the fp16-accumulate rate;
    datacenter, workstation and Titan cards run both at full rate."""
    checked = 0
    for entry in all_entries():
        spec, acc16 = entry.spec, entry.fp16_acc16_tflops
        if spec.fp16_tflops is None or acc16 is None:
            continue
        if entry.segment == "geforce":
            assert spec.fp16_tflops == pytest.approx(acc16 / 2, abs=0.06), spec.name
            checked += 1
        else:
            assert spec.fp16_tflops == pytest.approx(acc16), spec.name
    assert checked >= 8
    assert get_gpu("Titan RTX").fp16_tflops == pytest.approx(130.5)
    assert get_gpu("RTX 4090").tflops("amp") == pytest.approx(165.2)
    assert get_gpu("RTX 3090").tflops("bf16") == pytest.approx(71)


# Datasheet peaks of rows added for #13: (name, memory GB, GB/s, fp32, fp16 tensor, bf16 tensor).
DATASHEET_PEAKS = (
    ("GTX 1070", 8, 256, 6.46, None, None),
    ("P4", 8, 192, 5.5, None, None),
    ("P40", 24, 346, 11.76, None, None),
    ("Titan V", 12, 652.8, 14.9, 110, None),
    ("RTX 2080", 8, 448, 10.07, 40.25, None),
    ("MI100", 32, 1228.8, 23.1, 184.6, 92.3),
    ("MI210", 64, 1638.4, 22.6, 181.0, 181.0),
    ("MI325X", 256, 6000, 163.4, 1307.4, 1307.4),
)


@pytest.mark.parametrize(("name", "memory_gb", "bw", "fp32", "fp16", "bf16"), DATASHEET_PEAKS)
def test_added_rows_carry_their_datasheet_peaks(name: str, memory_gb: float, bw: float,
                                                fp32: float, fp16: float | None,
                                                bf16: float | None) -> None:
    spec = get_gpu(name)
    assert (spec.memory_gb, spec.mem_bw_gbs, spec.fp32_tflops) == (memory_gb, bw, fp32)
    assert (spec.fp16_tflops, spec.bf16_tflops) == (fp16, bf16)
    assert spec.vendor in spec.source  # a vendor document is the source


def test_pascal_cards_without_tensor_units_train_amp_at_fp32_speed() -> None:
    """GTX 1070 and Tesla P4 (the heterogeneous-scaling study's cards) have no tensor cores:
    their fp16 is 1/64 rate, so amp gets fp32's peak, not more."""
    for name in ("GTX 1070", "P4", "P40", "Titan Xp"):
        spec = get_gpu(name)
        assert spec.tflops("amp") == spec.tflops("fp32") == spec.fp32_tflops


def test_mi250_rows_are_one_gcd_and_add_up_to_the_package() -> None:
    """ROCm and torch count each of an MI250(X)'s two dies as a device: a row is one GCD, and
    two of them make the datasheet's package (128 GB, 3.2768 TB/s, 383.0 / 362.1 TF)."""
    for name, package_fp16, package_fp32_vector in (("MI250X", 383.0, 47.9),
                                                    ("MI250", 362.1, 45.3)):
        gcd = get_gpu(name)
        assert 2 * gcd.memory_gb == 128 and 2 * gcd.mem_bw_gbs == pytest.approx(3276.8)
        assert 2 * gcd.tflops("bf16") == pytest.approx(package_fp16)
        assert 2 * gcd.fp32_tflops == pytest.approx(package_fp32_vector)
        assert "per GCD" in gcd.source or "one row per GCD" in gcd.source
    assert get_gpu("MI250X").tflops("amp") > get_gpu("MI250").tflops("amp")
    # the spelling ROCm gives both parts reads as the slower one
    assert resolve_gpu_name("AMD Instinct MI250X/MI250") == "MI250"


def test_malformed_catalog_files_are_rejected(tmp_path: Path) -> None:
    header, first = CSV_PATH.read_text(encoding="utf-8").splitlines()[:2]
    cases = {
        "duplicate": [header, first, first],
        "bad number": [header, first.replace(",240,", ",fast,", 1)],
        "bad segment": [header, first.replace(",datacenter,", ",gaming,", 1)],
    }
    for label, lines in cases.items():
        path = tmp_path / f"{label}.csv"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(CatalogFileError):
            read_entries(path)
    assert len(read_entries(CSV_PATH)) == len(all_gpus())


def test_loading_the_catalog_imports_nothing_heavy() -> None:
    code = ("import sys, gpucost.catalog as c; c.all_gpus(); c.resolve_gpu_name('a100'); "
            "print(sorted(m for m in ('numpy', 'pandas', 'torch', 'rich') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- reference data (../shared/data) -----------------------------------------------------------

def _benchmark_gpus(shared_data: Path) -> set[str]:
    names: set[str] = set()
    for path in sorted((shared_data / "benchmarks").glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            names.update(row["gpu"] for row in csv.DictReader(handle))
    return names


def test_every_benchmark_gpu_resolves(shared_data: Path) -> None:
    names = _benchmark_gpus(shared_data)
    assert len(names) >= 30
    for name in sorted(names):
        if any(marker in name.casefold() for marker in LAPTOP_MARKERS):
            assert try_resolve_gpu_name(name) is None, name  # never a desktop namesake
            continue
        spec = get_gpu(name)
        stated = re.search(r"(\d+)GB", name)
        if stated:  # "T4 16GB", "B200 192GB": the memory the log states is the card's
            assert abs(spec.memory_gb - float(stated.group(1))) <= 0.1 * spec.memory_gb or \
                name in spec.aliases, name


_NON_GPU_WORDS = ("tpu", "inferentia", "trainium", "gaudi", "virtex")
# clouds whose GpuInfo gives the per-GPU memory in MiB (RunPod and Vast do not, see README)
_PER_GPU_MIB_CLOUDS = ("gcp", "lambda", "nebius", "verda")


def _skypilot_accelerators(shared_data: Path) -> dict[str, set[tuple[str, float | None]]]:
    found: dict[str, set[tuple[str, float | None]]] = {}
    folder = shared_data / "skypilot-catalog-v8"
    for path in sorted(folder.glob("*.csv")):
        if path.name == "gcp_vms_host.csv":
            continue
        cloud = path.name.split("_")[0]
        with path.open(newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                name = row["AcceleratorName"]
                if not name:
                    continue
                memory_gb: float | None = None
                info = row.get("GpuInfo") or ""
                if cloud in _PER_GPU_MIB_CLOUDS and info:
                    # GCP/Lambda/Nebius write Python reprs, Verda JSON: read the one number
                    size = re.search(r"SizeInMiB['\"]?:\s*([\d.]+)", info)
                    memory_gb = float(size.group(1)) * 2**20 / 1e9 if size else None
                found.setdefault(name, set()).add((cloud, memory_gb))
    return found


def test_every_skypilot_gpu_accelerator_resolves(shared_data: Path) -> None:
    found = _skypilot_accelerators(shared_data)
    assert len(found) >= 50
    for name, seen in sorted(found.items()):
        if name.casefold().startswith(_NON_GPU_WORDS):
            assert try_resolve_gpu_name(name) is None, name
            continue
        resolved = resolve_gpu_name(name)
        for _cloud, memory_gb in seen:
            if memory_gb is None:
                continue
            spec = get_gpu(name, memory_gb=memory_gb)
            # GiB reported as GB is 7.4% off; the hint must land on a variant that close
            assert abs(spec.memory_gb - memory_gb) <= 0.1 * spec.memory_gb, (name, memory_gb)
            assert spec.name.split()[0] == resolved.split()[0]


def test_agrees_with_the_reference_spec_table(shared_data: Path) -> None:
    """Rows taken from gpu_specs.csv keep its numbers (within rounding)."""
    with (shared_data / "gpu_specs.csv").open(newline="", encoding="utf-8") as handle:
        reference = list(csv.DictReader(handle))
    assert len(reference) >= 20
    for row in reference:
        spec = get_gpu(row["gpu"])
        assert spec.name == row["gpu"]
        assert spec.memory_gb == pytest.approx(float(row["memory_gb"]))
        assert spec.mem_bw_gbs == pytest.approx(float(row["mem_bw_gbps"]), rel=0.02)
        assert spec.fp32_tflops == pytest.approx(float(row["fp32_tflops"]), rel=0.01)
        assert spec.fp16_tflops == pytest.approx(
            float(row["bf16_fp16_tensor_dense_tflops_fp32acc"]), rel=0.01)
        assert spec.nvlink_gbs == pytest.approx(float(row["nvlink_gbps_bidir_total"]))
        assert spec.pcie_gbs == pytest.approx(float(row["pcie_gbps_per_dir"]))
        assert spec.tdp_w == pytest.approx(float(row["tdp_w"]))
        if row["mamf_bf16_tflops_measured"]:
            assert get_entry(row["gpu"]).mamf_bf16_tflops == pytest.approx(
                float(row["mamf_bf16_tflops_measured"]))
        if row["tf32_tensor_dense_tflops"]:
            assert spec.tf32_tflops == pytest.approx(float(row["tf32_tensor_dense_tflops"]),
                                                     rel=0.01)


# --- gpucost gpus --------------------------------------------------------------------------------

def test_cli_table_lists_every_gpu_with_units_and_sources(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for unit in ("mem GB", "mem GB/s", "fp32 TF", "NVLink GB/s", "PCIe GB/s", "TDP W", "source"):
        assert unit in lines[0]
    rows = {line.split("  ")[0].strip(): line for line in lines[2:] if line.strip()}
    for spec in all_gpus():
        assert spec.name in rows
        assert spec.source in rows[spec.name]
    assert f"{len(all_gpus())} GPUs." in out


def test_cli_json_round_trips_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "gpucost-gpus"
    records = doc["gpus"]
    assert [r["name"] for r in records] == [s.name for s in all_gpus()]
    by_name = {r["name"]: r for r in records}
    h100 = get_gpu("H100")
    assert by_name[h100.name]["mem_bw_gbs"] == h100.mem_bw_gbs
    assert by_name[h100.name]["bf16_tflops"] == h100.bf16_tflops
    assert by_name["T4"]["tf32_tflops"] is None
    assert all(r["source"] and r["confidence"] for r in records)


def test_cli_shows_one_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus", "a100-80gb"]) == 0
    out = capsys.readouterr().out
    assert_golden("gpus_show_a100_80gb.txt", out)
    assert main(["gpus", "RTX4090", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)["gpu"]
    assert record["name"] == "RTX 4090" and record["segment"] == "geforce"
    assert record["fp16_tflops"] == pytest.approx(record["fp16_acc16_tflops"] / 2, abs=0.06)


def test_cli_unknown_gpu_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus", "RTX 4099"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "unknown GPU 'RTX 4099'" in captured.err and "RTX 4090" in captured.err
