"""The single-GPU fit stays inside what the hardware can do (issue 20: a model whose reasons are
physical). Two bounds, both from the GPU catalog's published figures, not from the fit's data:

- a board sustains its measured best bf16 matmul (``mamf_bf16_tflops``) within its power limit,
  so a generation's flops per joule is at least MAMF / TDP (TF32: scaled by its peak over bf16's);
- no GEMM or convolution runs faster than the fastest rate its unit has on the spec sheet (fp16
  with fp16 accumulation where a GeForce card has it, else the unit's peak);
- device memory moves 60-95 % of its listed bandwidth (copy kernels reach 80-92 %).
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucost.catalog import all_entries, get_entry, get_gpu
from gpucost.model import translate

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def _fit_module() -> Any:
    sys.path.insert(0, str(REPO / "scripts"))
    import fit_calibration

    return fit_calibration


def _fastest_tflops(gpu: str, unit: str) -> float:
    spec = get_gpu(gpu)
    peak = translate.peak_tflops(spec, unit)
    acc16 = get_entry(gpu).fp16_acc16_tflops if unit == "fp16" else None
    return max(peak, acc16 or 0.0)


def test_power_floor_is_the_best_measured_matmul_at_the_power_limit() -> None:
    h100, a100_pcie = get_entry("H100 SXM5 80GB"), get_entry("A100 PCIe 40GB")
    assert (h100.mamf_bf16_tflops, h100.spec.tdp_w, h100.spec.tf32_tflops,
            h100.spec.bf16_tflops) == (794.5, 700, 494.5, 989), "redo the sums"
    assert (a100_pcie.mamf_bf16_tflops, a100_pcie.spec.tdp_w) == (252.9, 250), "redo the sums"
    floors = _fit_module().power_floors([("9", "fp16"), ("9", "tf32"), ("8", "fp16"),
                                         ("7", "fp16")])
    # 794.5e12 / 700 W; TF32 at 494.5 / 989 of it. Ampere's highest is the 250 W A100 PCIe's.
    assert floors[("9", "fp16")] == pytest.approx(1.135e12)
    assert floors[("9", "tf32")] == pytest.approx(0.5675e12)
    assert floors[("8", "fp16")] == pytest.approx(252.9e12 / 250)
    # Only the keys asked for, and no floor where no board of the generation has a MAMF.
    assert set(floors) == {("9", "fp16"), ("9", "tf32"), ("8", "fp16")}


def test_blackwell_has_a_power_floor_from_its_measured_matmul() -> None:
    """The B200's MAMF (stas00's table: 1745 TFLOPS bf16) gives compute capability 10 a floor.
    Without one the fit held the B200 to 0.137 TFLOPS per joule, 137 TFLOPS at 1000 W, to
    stand in for its CNN rows' host ceiling; refitted without BERT, it predicted a B200 at 0.6x
    the H100 a transformer was measured on."""
    b200 = get_entry("B200")
    assert (b200.mamf_bf16_tflops, b200.spec.tdp_w, b200.spec.bf16_tflops,
            b200.spec.tf32_tflops) == (1745.0, 1000, 2250, 1125), "redo the sums"
    floors = _fit_module().power_floors([("10", "fp16"), ("10", "tf32")])
    # The B200's 1.745e12 flop/J is above the GB200's 1822 TFLOPS at 1200 W (1.518e12).
    assert floors[("10", "fp16")] == pytest.approx(1.745e12)
    assert floors[("10", "tf32")] == pytest.approx(1.745e12 * 1125 / 2250)


def test_a_transformer_measured_on_an_h100_gains_what_a_b200_adds() -> None:
    """A decoder's step is GEMMs and the memory traffic around them: a B200 has 2.2x the H100
    SXM's measured best matmul (1745 against 794.5 TFLOPS) and 2.4x its memory bandwidth, and
    the host's share of a 355M-parameter model's step at batch 64 is small. Lambda measured
    BERT-large at 1.69x (fp16) and 1.93x (TF32) the H100's throughput, each at its own batch.
    With the B200's power term free, its fp16 was 1.44x."""
    import gpucost

    for precision, throughput in (("fp16", 310.0), ("tf32", 146.0)):
        profile = gpucost.Profile.from_measurement(
            gpu="H100 SXM5 80GB", throughput=throughput, batch_size=64, precision=precision,
            param_count=355e6, name="gpt2-medium")
        ratio = (gpucost.predict(profile, gpu="B200", batch_size=64).throughput
                 / gpucost.predict(profile, gpu="H100 SXM5 80GB", batch_size=64).throughput)
        assert 1.5 < ratio < 2.4, (precision, ratio)


def _check_bounds(cal: dict[str, Any]) -> None:
    floors = _fit_module().power_floors(
        [tuple(k.split("|")) for k in cal["power_flops_per_joule"]])
    assert floors, "no generation with a measured matmul was fitted"
    for (gen, unit), floor in floors.items():
        assert cal["power_flops_per_joule"][f"{gen}|{unit}"] >= floor * 0.999, (gen, unit)
    for table in ("gemm_efficiency_gpu", "compute_efficiency_gpu"):
        for key, eff in cal[table].items():
            gpu, unit = key.split("|")
            cap = _fastest_tflops(gpu, unit) / translate.peak_tflops(get_gpu(gpu), unit)
            assert eff <= cap * 1.03, f"{table} {key}: {eff:.2f} of the peak, cap {cap:.2f}"
    for gpu, eff in cal["memory_efficiency_gpu"].items():
        assert 0.6 * 0.97 <= eff <= 0.95 * 1.03, f"{gpu} moves {eff:.2f} of its bandwidth"


def test_shipped_calibration_is_inside_the_hardware_bounds() -> None:
    _check_bounds(dict(translate.shipped_calibration_data()))


@pytest.mark.slow
def test_a_fit_without_the_transformer_rows_stays_inside_the_bounds() -> None:
    """The rows that pin GEMMs (BERT) held out, as the bench's leave-one-workload-out does:
    left free, the fit capped the H100's TF32 at 0.25 TFLOPS per joule and put GEMMs at
    1.2-1.5x the peak of A100s and V100s."""
    if not (DATA / "benchmarks").is_dir():
        pytest.skip("reference data (../shared/data) not present")
    fitc = _fit_module()
    obs, _ = fitc.load_lambda(fitc.lambda_paths(DATA), get_gpu)
    fit = fitc.fit_single([o for o in obs if "bert" not in o.model], get_gpu)
    _check_bounds(fitc.single_calibration(fit))


def test_variants_of_one_chip_share_its_efficiency() -> None:
    """What tensor cores reach of their peak belongs to the silicon: the fit keys a GPU's
    efficiency by compute capability and SM count, so memory and power variants share it, and
    an unmeasured variant (a V100 PCIe, an L40S) takes its measured sibling's rather than its
    architecture's median."""
    chip = _fit_module().chip
    assert chip(get_gpu("V100 SXM2 16GB")) == chip(get_gpu("V100 PCIe 16GB"))
    assert chip(get_gpu("A100 PCIe 40GB")) == chip(get_gpu("A100 SXM4 80GB"))
    assert chip(get_gpu("H100 PCIe 80GB")) != chip(get_gpu("H100 SXM5 80GB"))  # 114 vs 132 SMs
    assert chip(get_gpu("RTX 3090")) != chip(get_gpu("RTX A6000"))  # 82 vs 84 SMs
    cal = translate.shipped_calibration()
    for measured, variant in (("V100 SXM2 16GB", "V100 PCIe 16GB"),
                              ("RTX 6000 Ada", "L40S")):
        for precision in ("fp16", "tf32"):
            assert (translate.efficiencies(get_gpu(variant), precision, cal)[0]
                    == translate.efficiencies(get_gpu(measured), precision, cal)[0])


@pytest.mark.slow
def test_without_the_transformer_rows_gemm_classes_stay_near_their_unit() -> None:
    """cuBLAS reaches about the same share of the tensor-core peak on every datacenter part
    (the catalog's measured best matmuls spread 0.04 in log), so with BERT held out a device
    class's GEMM efficiency stays within three of those spreads of its unit's, whatever GEMMs the
    other families carry (with a loose prior the V100's fell to 0.66 of the unit's and held-out
    BERT ran 1.6x faster on it than predicted). GeForce classes, rated at the halved
    fp32-accumulate rate, may range further, up to the fp16-accumulate rate."""
    if not (DATA / "benchmarks").is_dir():
        pytest.skip("reference data (../shared/data) not present")
    fitc = _fit_module()
    obs, _ = fitc.load_lambda(fitc.lambda_paths(DATA), get_gpu)
    cal = fitc.single_calibration(fitc.fit_single([o for o in obs if "bert" not in o.model],
                                                  get_gpu))
    unit_eff = cal["gemm_efficiency_default"]
    datacenter = {k: v for k, v in cal["gemm_efficiency_class"].items()
                  if not k.partition("|")[0].endswith(translate.GEFORCE_SUFFIX)}
    assert {"7.0|fp16", "8.0|fp16", "8.9|fp16", "9.0|tf32"} <= set(datacenter)
    shares = [math.log(e.mamf_bf16_tflops / e.spec.bf16_tflops) for e in all_entries()
              if e.mamf_bf16_tflops and e.spec.bf16_tflops and e.spec.vendor == "NVIDIA"]
    spread = statistics.pstdev(shares)
    assert len(shares) >= 4 and 0.02 < spread < 0.06
    for key, eff in datacenter.items():
        ratio = eff / unit_eff[key.partition("|")[2]]
        assert abs(math.log(ratio)) <= 4 * spread, f"{key}: {ratio:.2f} of its unit's"
