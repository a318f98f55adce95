"""Memory fit: predicted peak per GPU against the target's memory, and the advice when it fails."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucost.catalog import get_gpu
from gpucost.model.memory import (
    ACTIVATION_BYTES_PER_FLOP_PER_PARAM,
    STATE_BYTES_PER_PARAM,
    fit_memory,
    usable_gb,
)
from gpucost.model.perf import predict
from gpucost.profile import Profile


def measured(peak_gb: float, batch: int = 32, params: float = 1e9) -> Profile:
    return Profile(gpu="A100 SXM4 80GB", precision="bf16", batch_size=batch, step_time_s=0.5,
                   param_count=params, peak_memory_gb=peak_gb, name="llm")


def test_measured_peak_by_hand() -> None:
    # 1e9 params x 16 B = 16 GB of states; measured peak 48 GB at batch 32 -> 1 GB/sample.
    # 24 GB as marketed is 24 GiB (25.77e9 bytes): 25.77 * 0.95 - 1 = 23.48 GB usable
    l4 = get_gpu("L4")
    fit = fit_memory(measured(48.0), l4)
    assert fit.states_gb == pytest.approx(16.0)
    assert fit.activations_gb == pytest.approx(32.0)
    assert fit.usable_gb == pytest.approx(24 * 2**30 / 1e9 * 0.95 - 1)
    assert not fit.fits and fit.basis == "measured"
    # Room for activations: 23.48 - 16 = 7.48 GB -> 7 samples; 32 samples need 5 micro-steps.
    assert (fit.micro_batch, fit.grad_accum_steps) == (7, 5)
    assert "micro-batch 7 x 5 accumulation steps" in fit.advice
    assert fit_memory(measured(48.0), get_gpu("H100 SXM5 80GB")).fits


def test_usable_memory_counts_the_binary_gigabytes_gpus_are_sold_in() -> None:
    # nvidia-smi reports 81920 MiB on an A100 80GB: 85.9e9 bytes, not 80e9. Counted in 1e9
    # bytes the rule left 75 GB usable, 87 % of it, before any reserve was due.
    usable = fit_memory(measured(1.0), get_gpu("A100 SXM4 80GB")).usable_gb
    assert 0.9 * 81920 * 2**20 / 1e9 < usable < 81920 * 2**20 / 1e9


def test_sharding_advice_when_states_do_not_fit() -> None:
    # 7e9 params x 16 B = 112 GB of states: no micro-batch helps on an 80 GB GPU.
    p = measured(130.0, batch=8, params=7e9)
    h100 = get_gpu("H100 SXM5 80GB")
    alone = fit_memory(p, h100)
    assert not alone.fits and alone.micro_batch is None
    assert "shard optimizer state" in alone.advice
    # ZeRO-2 over 8 GPUs: 7e9 x (4 + 12/8) B = 38.5 GB + 18 GB activations = 56.5 GB: fits.
    group = fit_memory(p, h100, group_gpus=8)
    assert "ZeRO-2 over 8 GPUs (56.5 GB per GPU)" in group.advice


def test_estimate_from_flops_is_capped_by_the_source_gpu() -> None:
    # ResNet-50 at batch 256 ran on a 16 GB V100: the estimate cannot exceed what it had.
    p = Profile.from_measurement(gpu="V100 SXM2 16GB", throughput=833.0, batch_size=256,
                                 precision="amp", param_count=25.6e6, flops_per_sample=24.6e9)
    fit = fit_memory(p, get_gpu("V100 SXM2 16GB"))
    assert fit.fits and fit.basis == "estimated"
    assert fit.peak_gb is not None and fit.peak_gb <= usable_gb(get_gpu("V100 SXM2 16GB")) + 1e-9
    # A model small enough for the rule to apply uncapped: 1e8 params, 6e10 flops/sample,
    # bf16: 1e5 x 600 B = 60 MB per sample x 16 = 0.96 GB + 1.6 GB states.
    small = Profile(gpu="A100 SXM4 80GB", precision="bf16", batch_size=16, step_time_s=0.1,
                    param_count=1e8, flops_per_sample=6e10)
    fit = fit_memory(small, get_gpu("L4"))
    assert ACTIVATION_BYTES_PER_FLOP_PER_PARAM == 1e5
    assert fit.activations_gb == pytest.approx(0.96)
    assert fit.peak_gb == pytest.approx(0.96 + 1e8 * STATE_BYTES_PER_PARAM / 1e9)


def test_states_only_when_activations_are_unknown() -> None:
    p = Profile(gpu="A100 SXM4 80GB", precision="fp32", batch_size=8, step_time_s=0.1,
                param_count=2e9)
    fit = fit_memory(p, get_gpu("L4"))
    assert fit.basis == "states only" and fit.peak_gb is None
    assert not fit.fits  # 32 GB of states on a 24 GB card
    ok = fit_memory(p, get_gpu("H100 SXM5 80GB"))
    assert ok.fits and "activations not estimated" in ok.advice


@settings(max_examples=150, deadline=None)
@given(peak=st.floats(1.0, 500.0), batch=st.integers(1, 1024), params=st.floats(1e6, 3e9),
       gpu=st.sampled_from(["T4", "L4", "A10G", "A100 SXM4 80GB", "RTX 4090", "H200 SXM 141GB"]))
def test_proposed_micro_batch_fits_and_is_the_largest(peak: float, batch: int, params: float,
                                                      gpu: str) -> None:
    p = measured(peak, batch=batch, params=params)
    fit = fit_memory(p, get_gpu(gpu))
    if fit.fits:
        assert fit.peak_gb is not None and fit.peak_gb <= fit.usable_gb
        return
    if fit.micro_batch is None:
        return
    assert fit.activations_gb is not None and fit.grad_accum_steps is not None
    per_sample = fit.activations_gb / batch
    assert fit.states_gb + per_sample * fit.micro_batch <= fit.usable_gb + 1e-9
    assert fit.states_gb + per_sample * (fit.micro_batch + 1) > fit.usable_gb
    assert fit.micro_batch * fit.grad_accum_steps >= batch
    assert fit.micro_batch * (fit.grad_accum_steps - 1) < batch
    assert math.isfinite(fit.states_gb)


def test_prediction_memory_uses_the_smallest_member() -> None:
    p = measured(30.0)
    kept = predict(p, gpus_per_node=2, member_gpus=["H100 SXM5 80GB", "L4"], fit_batch="keep")
    assert kept.memory.gpu == "L4" and not kept.memory.fits
    # By default the group runs the largest batch that fits its smallest member.
    pred = predict(p, gpus_per_node=2, member_gpus=["H100 SXM5 80GB", "L4"])
    assert pred.memory.gpu == "L4" and pred.memory.fits
    # ... split evenly: 32 on a GPU that holds 13 runs as 3 micro-steps of 11.
    micro = kept.memory.micro_batch
    assert micro is not None and pred.batch_reduced_from == p.batch_size
    assert pred.grad_accum_steps == math.ceil(p.batch_size / micro)
    assert pred.batch_size == math.ceil(p.batch_size / pred.grad_accum_steps) <= micro
    assert predict(p, gpu="H100 SXM5 80GB").memory.fits


def test_a_fractional_gpu_is_planned_in_its_slice_of_the_memory(tmp_path: Path) -> None:
    # AWS g6f.large is an eighth of an L4: 3 GB, not 24. ResNet-50 at batch 256 (amp) fits a
    # whole L4 but not its eighth, where the batch is split: no ranked plan needs more than
    # its slice holds.
    import datetime as dt

    import gpucost
    from gpucost.pricing.snapshot import Offers, Snapshot, write_snapshot

    rows = [{"provider": "aws", "region": "us-east-1", "instance_type": name, "gpu": "L4",
             "gpu_count": count, "gpu_memory_gb": 24 * count, "price_hr": price,
             "storage_gb_month": 0.1, "egress_gb": 0.09}
            for name, count, price in (("g6f.large", 0.125, 0.12), ("g6.xlarge", 1.0, 0.8))]
    path = write_snapshot(Snapshot(source="slices", fetched_at=dt.datetime(2026, 12, 1,
                                                                          tzinfo=dt.UTC),
                                   offers=Offers.from_records(rows)), tmp_path)
    frame = gpucost.compare("resnet50-v100-amp", prices=[path])
    whole = frame[frame.instance_type == "g6.xlarge"].iloc[0]
    assert whole.micro_batch == 256 and whole.peak_gb <= usable_gb(get_gpu("L4"))
    sliced = frame[frame.instance_type == "g6f.large"]
    slice_room = usable_gb(get_gpu("L4").share(0.125))
    assert slice_room < 3.0
    assert len(sliced) == 1 and sliced.iloc[0].peak_gb <= slice_room
    assert sliced.iloc[0].micro_batch < 256  # split into micro-batches with accumulation
    # the throughput stays an eighth of the L4's (less the smaller micro-batch's cost)
    assert sliced.iloc[0].throughput < whole.throughput / 8
