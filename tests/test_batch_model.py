"""Throughput in the batch (#20): what a step pays whatever its batch, small GEMMs that leave
SMs idle, and activation memory from a workload's signature, so that a batch that cannot fit is
re-planned and a small batch is predicted slow."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import gpucost
from gpucost.catalog import get_gpu
from gpucost.model import signature, translate
from gpucost.model.memory import (
    activation_gb_per_sample,
    fit_memory,
    signature_activation_bytes,
)
from gpucost.planfile import load_plan
from gpucost.profile import Profile

# Transformer-XL large as published (Dai et al. 2019, WikiText-103): 285 M parameters, 384
# tokens per training segment; forward + backward ~ 6 flops per parameter per token.
TXL_PARAMS = 285e6
TXL_FLOPS = 6 * TXL_PARAMS * 384


def gnmt_on_a100() -> Profile:
    """A GNMT-sized measurement (160 M parameters) at batch 1024 on an A100 80 GB."""
    return Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=25_000.0, batch_size=1024,
                                    precision="amp", param_count=160e6, name="GNMT v2")


def test_a_gnmt_measurement_is_replanned_on_an_8gb_card() -> None:
    pred = gpucost.predict(gnmt_on_a100(), gpu="RTX 3070")
    assert pred.batch_reduced_from == 1024
    assert pred.batch_size < 1024 and pred.grad_accum_steps > 1
    # The same optimizer step, split evenly: no more samples than the profile's batch needs.
    assert 1024 <= pred.batch_size * pred.grad_accum_steps < 1024 + pred.grad_accum_steps
    fit = fit_memory(gnmt_on_a100(), get_gpu("RTX 3070"), batch_size=pred.batch_size)
    assert fit.fits and fit.basis == "signature"


def test_predict_names_the_smaller_micro_batch(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.cli import main

    path = gnmt_on_a100().save(tmp_path / "gnmt.json")
    assert main(["predict", "-p", str(path), "--gpu", "RTX 3070"]) == 0
    out = capsys.readouterr().out
    pred = gpucost.predict(gnmt_on_a100(), gpu="RTX 3070")
    assert "batch 1024 does not fit RTX 3070" in out
    assert f"{pred.batch_size} per device x {pred.grad_accum_steps} accumulation steps" in out


def test_a_285m_transformer_at_batch_1_runs_at_most_half_its_batch_32_rate() -> None:
    p = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=60.0, batch_size=32,
                                 precision="amp", param_count=TXL_PARAMS,
                                 flops_per_sample=TXL_FLOPS, name="transformer-xl large")
    one = gpucost.predict(p, gpu="A100 SXM4 80GB", batch_size=1).throughput
    assert one <= 0.5 * p.throughput
    v100 = gpucost.predict(p, gpu="V100 SXM2 16GB", batch_size=1).throughput
    v100_32 = gpucost.predict(p, gpu="V100 SXM2 16GB", batch_size=32, fit_batch="keep")
    assert v100 <= 0.5 * v100_32.throughput


def test_once_per_step_bytes_follow_the_models_parameters_per_flop() -> None:
    sig = signature.builtin()["decoder-only"]
    assert sig.params and sig.flops_per_sample
    own = translate.signature_step_bytes_per_flop(sig, "tf32", sig.params, sig.flops_per_sample)
    assert own == pytest.approx(sig.step_bytes_per_flop)
    # A third of the tokens per sample: three times the parameters per flop.
    short = translate.signature_step_bytes_per_flop(sig, "tf32", sig.params,
                                                    sig.flops_per_sample / 3)
    assert short == pytest.approx(3 * own)
    # Mixed precision casts weights and scales gradients: more bytes per step than fp32.
    assert translate.signature_step_bytes_per_flop(sig, "amp", sig.params,
                                                   sig.flops_per_sample) > own


# ---- small GEMMs ------------------------------------------------------------------------------
def test_a_gemm_with_fewer_tiles_than_sms_leaves_the_rest_idle() -> None:
    # 128 x 1024: eight 128x128 tiles, or sixteen 128x64 (at 2/3 rate), or thirty-two 64x64
    # (half rate): on 108 SMs the best is 32/108 x 0.5.
    assert translate.tile_utilisation(128, 1024, 108) == pytest.approx(32 / 108 * 0.5)
    # Enough tiles for every SM: full rate.
    assert translate.tile_utilisation(8192, 8192, 108) == pytest.approx(1.0)
    # Rows that fill a tile only partly waste the rest of it.
    assert translate.tile_utilisation(8192 + 1, 8192, 108) < 1.0


def test_utilisation_grows_with_the_batch_and_falls_with_more_sms() -> None:
    shapes = signature.builtin()["seq2seq-rnn"].gemm_shapes
    utils = [translate.gemm_utilisation(shapes, b, 108) for b in (1, 8, 64, 512, 4096)]
    assert utils == sorted(utils) and utils[0] < 0.5 * utils[-1]
    assert translate.gemm_utilisation(shapes, 8, 132) < translate.gemm_utilisation(shapes, 8, 46)
    assert translate.gemm_utilisation((), 1, 108) == 1.0  # shapes unknown: full tiles
    assert translate.gemm_utilisation(shapes, 1, None) == 1.0  # SMs unknown


# ---- activation memory ------------------------------------------------------------------------
def test_activations_scale_with_flops_over_the_width() -> None:
    sig = signature.builtin()["encoder-only"]
    assert sig.activation_bytes_per_sample and sig.params and sig.flops_per_sample
    same = signature_activation_bytes(sig, sig.params, sig.flops_per_sample)
    assert same == pytest.approx(sig.activation_bytes_per_sample)
    # Twice the tokens per sample: twice the flops and twice the activations.
    assert signature_activation_bytes(sig, sig.params, 2 * sig.flops_per_sample) == \
        pytest.approx(2 * same)
    # Eight times the parameters at the same tokens: width x2, depth x2 -> activations x4.
    assert signature_activation_bytes(sig, 8 * sig.params, None) == pytest.approx(4 * same)


def test_mixed_precision_takes_the_signatures_amp_step_and_a_measured_peak_wins() -> None:
    def bert(precision: str, peak: float | None = None) -> Profile:
        return Profile(gpu="CPU", precision=precision, batch_size=8, step_time_s=1.0,
                       param_count=110e6, name="bert-base", peak_memory_gb=peak)

    sig = signature.builtin()["encoder-only"]
    assert sig.activation_bytes_per_sample and sig.activation_bytes_per_sample_amp
    fp32, basis = activation_gb_per_sample(bert("fp32"))
    amp, _ = activation_gb_per_sample(bert("amp"))
    assert basis == "signature" and fp32 is not None and amp is not None
    # The amp step's own measurement (its layer norms stay fp32), not half the fp32 one.
    ratio = sig.activation_bytes_per_sample_amp / sig.activation_bytes_per_sample
    assert amp / fp32 == pytest.approx(ratio) and ratio > 0.52
    measured, basis = activation_gb_per_sample(bert("amp", peak=10.0))
    assert basis == "measured" and measured == pytest.approx((10.0 - 110e6 * 16 / 1e9) / 8)


def test_a_signature_without_an_amp_measurement_halves_its_fp32_bytes() -> None:
    sig = dataclasses.replace(signature.builtin()["encoder-only"],
                              activation_bytes_per_sample_amp=None)
    assert sig.params and sig.activation_bytes_per_sample
    assert signature_activation_bytes(sig, sig.params, None, precision="amp") == pytest.approx(
        sig.activation_bytes_per_sample / 2)


# Batches Lambda's benchmark trained Tacotron2 at (lambda_throughput_families.csv). Counted
# with the CPU's fused LSTM layer, whose workspace (32 x hidden floats a time step for each
# call) its frame-by-frame decoder paid a frame at a time, the rule said 1.3-1.5x the memory
# these GPUs have: they ran.
@pytest.mark.parametrize(("gpu", "precision", "batch"), [
    ("A100 PCIe 40GB", "tf32", 144), ("A100 PCIe 80GB", "tf32", 256),
    ("GTX 1080 Ti", "fp16", 72), ("Quadro RTX 8000", "fp16", 336)])
def test_tacotron2_fits_at_the_batches_it_ran(gpu: str, precision: str, batch: int) -> None:
    p = Profile.from_measurement(gpu="H200 SXM 141GB", throughput=1000.0, batch_size=batch,
                                 precision=precision, param_count=28.2e6, name="tacotron2")
    fit = fit_memory(p, get_gpu(gpu))
    assert fit.basis == "signature" and fit.fits, fit.advice


# Batches Lambda's benchmark trained BERT-large SQuAD at in fp32 (lambda_throughput_calibration
# .csv, v1 rows: each card about as full as its batch list allowed). Counted with a fused
# attention kernel and no dropout, the rule held over twice these: BERT's code keeps its
# attention probabilities, their dropout mask and the dropped probabilities.
@pytest.mark.parametrize(("gpu", "ran"), [("V100 SXM2 16GB", 8), ("RTX 3090", 16),
                                          ("A100 SXM4 40GB", 28)])
def test_bert_large_fits_about_the_batch_the_benchmark_filled(gpu: str, ran: int) -> None:
    # measured on an A100 80 GB at its benchmark row's batch and throughput
    p = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=75.6, batch_size=64,
                                 precision="tf32", param_count=335e6, name="BERT-large SQuAD")
    fit = fit_memory(p, get_gpu(gpu))
    assert fit.basis == "signature" and not fit.fits
    assert fit.micro_batch is not None and ran <= fit.micro_batch < 1.5 * ran


def test_a_half_precision_model_keeps_half_what_autocast_keeps_more_than() -> None:
    # "fp16"/"bf16": the model itself in half precision (model.half(), apex's O2, as NVIDIA's
    # BERT trains): every kept tensor in 2 bytes. "amp": autocast over fp32 weights, which
    # runs layer norms and softmaxes in fp32 and keeps the half copies its GEMMs take beside
    # them (the signature's own mixed-precision step).
    def kept(precision: str) -> float:
        p = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=84.0, batch_size=32,
                                     precision=precision, param_count=110e6, name="BERT-base")
        per_sample, basis = activation_gb_per_sample(p)
        assert basis == "signature" and per_sample is not None
        return per_sample

    assert kept("fp16") == pytest.approx(kept("fp32") / 2)
    assert kept("bf16") == pytest.approx(kept("fp16"))
    assert kept("fp16") < kept("amp") < kept("fp32")


def test_no_estimate_is_memory_unknown_never_fits(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from gpucost.cli import main

    p = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=500.0, batch_size=64,
                                 precision="amp", param_count=50e6, name="my-model")
    fit = fit_memory(p, get_gpu("L4"))
    assert fit.peak_gb is None and fit.advice.startswith("memory: unknown")
    assert "fits" not in fit.advice
    path = p.save(tmp_path / "mine.json")
    assert main(["predict", "-p", str(path), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert "memory: unknown" in out and "fits:" not in out
    # compare and the plan file say so too (were: silent, as if every batch fitted)
    assert main(["compare", "-p", str(path), "--samples", "1e6", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert [n for n in notes if n.startswith("memory: unknown: profile 'my-model'")], notes
    plan_path = tmp_path / "plan.toml"
    assert main(["plan", "-p", str(path), "--samples", "1e6", "-o", str(plan_path)]) == 0
    assert "note: memory: unknown" in capsys.readouterr().out
    written = load_plan(plan_path)
    assert written.workload.peak_memory_gb is None
    assert [n for n in written.assumptions.notes if n.startswith("memory: unknown")]
    for node in (["L4"], ["L4", "T4"]):  # an offer's curve, and a mixed node's at a price
        gpus = [arg for gpu in node for arg in ("--gpu", gpu)]
        assert main(["scale", "-p", str(path), *gpus, "--price-hr", "2", "-N", "2",
                     "--samples", "1e6", "--json"]) == 0
        scale_notes = json.loads(capsys.readouterr().out)["notes"]
        assert [n for n in scale_notes if n.startswith("memory: unknown")], scale_notes
    estimated = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=500.0, batch_size=64,
                                         precision="amp", param_count=50e6, name="bert-like")
    assert main(["compare", "-p", str(estimated.save(tmp_path / "est.json")), "--samples",
                 "1e6", "--json"]) == 0
    assert not [n for n in json.loads(capsys.readouterr().out)["notes"] if "unknown" in n]


def test_predict_states_the_step_in_the_batch_as_a_larger_batch_finds_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`gpucost predict` says what a step pays whatever its batch and what each sample adds;
    asking for another batch with --batch lands on that line."""
    from gpucost.cli import main

    group = ["predict", "--gpu", "A100 SXM4 80GB", "-k", "8", "-n", "2", "--json"]
    assert main(group) == 0
    doc = json.loads(capsys.readouterr().out)
    line = doc["step_in_batch"]
    batch = doc["batch_size_per_gpu"]
    assert line["samples_per_gpu"] == batch * doc["grad_accum_steps"]
    assert line["fixed_s"] > 0.0 and line["per_sample_s"] > 0.0
    assert line["fixed_s"] + line["per_sample_s"] * line["samples_per_gpu"] == pytest.approx(
        doc["step_time_s"], rel=1e-9)
    assert main([*group, "--batch", str(2 * batch)]) == 0
    doubled = json.loads(capsys.readouterr().out)
    assert doubled["step_time_s"] == pytest.approx(
        line["fixed_s"] + line["per_sample_s"] * 2 * batch, rel=1e-9)
    assert main(group[:-1]) == 0
    assert f"ms x {batch:,} images per GPU" in capsys.readouterr().out


# ---- groups -----------------------------------------------------------------------------------
def test_a_mixed_group_is_measured_against_its_fastest_member() -> None:
    """Was: 100 % on one node: efficiency was against the slowest member, whose pace the group
    runs at, so an A100 waiting on a T4 looked perfectly used."""
    from gpucost.profile import resolve_profile

    p = resolve_profile("bert-large-a100-fp16")
    mixed = gpucost.predict(p, gpus_per_node=2, member_gpus=["A100 SXM4 80GB", "T4"],
                            batch_size=16, fit_batch="keep")
    fast_alone = gpucost.predict(p, gpu="A100 SXM4 80GB", batch_size=16, fit_batch="keep")
    assert mixed.efficiency == pytest.approx(
        mixed.throughput / (2 * fast_alone.single_gpu_throughput), rel=1e-9)
    assert mixed.efficiency < 0.5
    same = gpucost.predict(p, gpus_per_node=2, member_gpus=["A100 SXM4 80GB"] * 2,
                           batch_size=16, fit_batch="keep")
    assert same.efficiency == pytest.approx(
        same.throughput / (2 * same.single_gpu_throughput), rel=1e-9)


def test_scale_shows_efficiency_falling_at_small_per_gpu_batches(
        capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from gpucost.cli import main

    assert main(["scale", "-p", "resnet50-v100-amp", "--gpu", "T4", "-k", "4", "-N", "2",
                 "--batch", "16", "--batch", "64", "--batch", "128", "--format", "json"]) == 0
    points = json.loads(capsys.readouterr().out)["batch_efficiency"]
    two = {p["batch"]: p["efficiency"] for p in points if p["nodes"] == 2}
    assert two[16] < two[64] < two[128] <= 1.0
    assert two[16] < 0.85  # a batch of 16 leaves little compute to hide the sync behind
    assert main(["scale", "-p", "resnet50-v100-amp", "--gpu", "T4", "-k", "4", "-N", "2",
                 "--batch", "16"]) == 0
    assert "scaling efficiency by per-GPU batch" in capsys.readouterr().out


def test_transformer_xl_large_at_batch_32_is_replanned_on_a_16gb_v100() -> None:
    # Its relative attention keeps score matrices per layer for the backward pass (heads x 384
    # queries x 768 keys), through a softmax autocast runs in fp32: about 0.96 GB a sample in
    # mixed precision, so 32 samples do not fit beside the model's states on 16 GB (issue 20:
    # it "fitted", and the run used a far smaller batch).
    p = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=100.0, batch_size=32,
                                 precision="fp16", param_count=TXL_PARAMS,
                                 name="Transformer-XL large")
    pred = gpucost.predict(p, gpu="V100 SXM2 16GB")
    assert pred.batch_reduced_from == 32
    assert pred.batch_size <= 16 and pred.batch_size * pred.grad_accum_steps >= 32


@pytest.mark.parametrize("name", ["Transformer-XL base", "transformerxlbase", "TransformerXL"])
def test_transformer_xl_base_at_batch_32_fits_a_16gb_v100_as_asked(name: str) -> None:
    # Base (16 x 512, 192 + 192 tokens, 192 M parameters, mostly embedding tables) keeps about
    # a fifth of large's activations a sample. Scaled from large by its parameter count it
    # needed ~0.36 GB a sample at fp16 and was re-planned to 16 x 2 on 16 GB, where its own
    # profile keeps ~0.17 GB: 32 samples and its states take ~9 GB. The plain name finds base
    # by the parameter count given.
    p = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=400.0, batch_size=32,
                                 precision="fp16", param_count=192e6, name=name)
    found = translate.workload_signature(p)
    assert found is not None and found.name == "transformer-xl-base"
    pred = gpucost.predict(p, gpu="V100 SXM2 16GB")
    assert pred.batch_reduced_from is None
    assert (pred.batch_size, pred.grad_accum_steps) == (32, 1)
