"""Workload signatures, precision as frameworks run it, the batch that fits, CPU profiles.

Issue 13: a step is translated class by class (what bounds each op class on the target), fp32
means PyTorch's defaults, a batch that does not fit the target shrinks, and a CPU-measured
profile carries a GPU host's launch cost instead of its own host milliseconds.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import statistics
import sys
from pathlib import Path

import pytest

import gpucost
from gpucost.catalog import get_gpu
from gpucost.errors import InputError, ProfileError
from gpucost.model import signature, translate
from gpucost.profile import Profile, StepBreakdown

REPO = Path(__file__).resolve().parents[1]


def measured(workload: str | dict[str, float] | None, *, gpu: str = "V100 SXM2 16GB",
             precision: str = "amp", name: str = "run", batch: int = 64) -> Profile:
    return Profile.from_measurement(gpu=gpu, throughput=500.0, batch_size=batch,
                                    precision=precision, param_count=1e8, name=name,
                                    workload=workload)


# ---- signatures -------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("resnet50", "cnn-classifier"),
    ("SSD300-ResNet50 v1.5", "detection"),  # the detector named first, its backbone after
    ("my-gpt2-finetune", "decoder-only"),
    ("bert_large_squad", "encoder-only"),
    ("GNMT v2 en-de", "seq2seq-rnn"),
    ("tacotron2", "conv-tts"),
    ("waveglow 16 kHz", "flow-audio"),
    ("mask_rcnn", "two-stage-detection"),
    ("Faster R-CNN R50-FPN", "two-stage-detection"),
    ("yolov5s", "detection"),
    ("t5-small translation", "encoder-decoder"),
    ("dlrm criteo", "mlp-recommender"),
    ("NeuMF", "mlp-recommender"),  # neural matrix factorisation, NCF's model
])
def test_profile_names_pick_the_builtin_signature(text: str, expected: str) -> None:
    found = signature.matched(text)
    assert found is not None and found.name == expected


def test_an_unknown_name_matches_nothing() -> None:
    assert signature.matched("experiment 42") is None


def test_operator_counts_sum_per_class() -> None:
    counts = {"aten::addmm": 6.0, "aten::mm": 4.0, "aten::convolution": 3.0, "aten::relu": 1.0}
    totals = signature.by_class(counts)
    assert totals == {"gemm": 10.0, "conv": 3.0, "elementwise": 1.0}
    assert totals["attention"] == 0.0  # a class with no operator counts nothing


def test_every_builtin_is_a_mix_of_flops_with_provenance() -> None:
    import json

    data = json.loads(signature.SIGNATURES_PATH.read_text(encoding="utf-8"))
    assert data["provenance"]["written_by"] == "scripts/build_signatures.py"
    required = {"cnn-classifier", "vit", "encoder-only", "decoder-only", "encoder-decoder",
                "seq2seq-rnn", "conv-tts", "flow-audio", "detection", "two-stage-detection",
                "unet", "mlp-recommender"}
    assert required <= set(signature.builtin())
    for sig in signature.builtin().values():
        assert sum(sig.flops_share.values()) == pytest.approx(1.0)
        assert sig.launches_per_step > 0 and sig.match
    # What profiling the definitions found: a CNN is convolutions, a transformer GEMMs with
    # some attention, GNMT mostly recurrent cells.
    sigs = signature.builtin()
    assert sigs["cnn-classifier"].share("conv") > 0.95
    assert sigs["decoder-only"].share("gemm") > 0.8 and sigs["decoder-only"].share("attention") > 0
    assert sigs["seq2seq-rnn"].share("recurrent") > 0.5


def test_workload_argument_is_checked_and_round_trips(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="unknown workload 'cnnn'") as err:
        measured("cnnn")
    assert "cnn-classifier" in (err.value.hint or "")
    with pytest.raises(ProfileError, match="share of flops"):
        measured({"gemm": 0.5})
    with pytest.raises(ProfileError, match="share of flops"):
        measured({"matmul": 1.0})
    p = measured({"gemm": 0.7, "attention": 0.3, "launches_per_step": 300.0})
    p.save(tmp_path / "p.json")
    back = Profile.load(tmp_path / "p.json")
    assert dict(back.workload or {}) == {"gemm": 0.7, "attention": 0.3, "launches_per_step": 300}
    assert translate.workload_signature(back) == translate.workload_signature(p)


# ---- precision as frameworks run it ---------------------------------------------------------
def test_fp32_matmuls_run_on_cuda_cores_and_tf32_on_tensor_cores() -> None:
    a100, v100 = "A100 PCIe 40GB", "V100 SXM2 16GB"
    spec = gpucost.get_gpu(a100)
    assert translate.math_unit(spec, "fp32", "gemm") == "fp32"
    assert translate.math_unit(spec, "fp32", "conv") == "tf32"  # cuDNN's default
    assert translate.math_unit(spec, "fp32", "gemm", matmul_tf32=True) == "tf32"
    assert translate.math_unit(spec, "tf32", "gemm") == "tf32"
    assert translate.math_unit(gpucost.get_gpu(v100), "tf32", "conv") == "fp32"  # no TF32 units

    def speedup(precision: str, workload: str) -> float:
        p = measured(workload, gpu=v100, precision=precision)
        return gpucost.predict(p, gpu=a100).throughput / p.throughput

    # A plain-fp32 transformer gains little from an A100 (measured: about 1.1x a V100); with
    # TF32 switched on, or for convolutions (TF32 by default), far more.
    assert speedup("fp32", "decoder-only") < 1.5
    assert speedup("tf32", "decoder-only") > 1.3 * speedup("fp32", "decoder-only")
    assert speedup("fp32", "cnn-classifier") > 1.3 * speedup("fp32", "decoder-only")


def test_a_recorded_matmul_precision_puts_fp32_matmuls_on_tf32() -> None:
    base = measured("decoder-only", gpu="V100 SXM2 16GB", precision="fp32")
    high = base.with_changes(environment={"float32_matmul_precision": "high"})
    a100 = "A100 SXM4 80GB"
    assert (gpucost.predict(high, gpu=a100).throughput
            > 1.3 * gpucost.predict(base, gpu=a100).throughput)


# ---- op classes ---------------------------------------------------------------------------
def test_recurrent_models_gain_far_less_from_fp16_tensor_cores() -> None:
    """From a GPU without tensor cores to one with many, at amp: a CNN or a transformer speeds
    up far more than an LSTM seq2seq model, whose small per-time-step kernels do not fill them."""
    def speedup(workload: str) -> float:
        p = measured(workload, gpu="GTX 1080 Ti", batch=32)
        return gpucost.predict(p, gpu="A100 SXM4 80GB").throughput / p.throughput

    rnn = speedup("seq2seq-rnn")
    assert rnn < 0.75 * speedup("encoder-only")
    # What it does gain lies between what memory gains and what the tensor cores' rate gains:
    # the cells re-read their weights every time step (bytes), and the per-time-step GEMMs still
    # run on the GPU's math units (flops); a step bound by neither alone gains between the two.
    def ratio(field: str) -> float:
        rates = [translate.rates_for(get_gpu(g), "amp") for g in ("A100 SXM4 80GB", "GTX 1080 Ti")]
        return float(getattr(rates[0], field) / getattr(rates[1], field))

    assert ratio("bytes_per_s") < rnn < ratio("flops_per_s")


def test_explicit_mix_and_builtin_name_translate_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    # An explicit mix has no GEMM shapes (full tiles) and no model size of its own: alike to the
    # built-in without them.
    sig = signature.builtin()["vit"]
    monkeypatch.setitem(signature.builtin(), "vit",
                        dataclasses.replace(sig, gemm_shapes=(), params=None))
    explicit = {**sig.flops_share, "bytes_per_flop": sig.bytes_per_flop,
                "step_bytes_per_flop": sig.step_bytes_per_flop,
                "launches_per_step": sig.launches_per_step,
                "flops_per_sample": sig.flops_per_sample or 0.0}
    by_name = gpucost.predict(measured("vit"), gpu="H100 SXM5 80GB").throughput
    by_mix = gpucost.predict(measured(explicit), gpu="H100 SXM5 80GB").throughput
    assert by_mix == pytest.approx(by_name, rel=1e-9)


# ---- the batch that fits --------------------------------------------------------------------
def bert_large() -> Profile:
    # BERT-large at batch 112 on an A100 80GB, 60 GB at peak: not on a 24 GB L4.
    return Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=152.85, batch_size=112,
                                    precision="fp16", param_count=335e6, name="bert-large",
                                    peak_memory_gb=60.0)


def test_a_batch_that_does_not_fit_is_predicted_at_the_largest_that_does() -> None:
    p = bert_large()
    fit = gpucost.fit_memory(p, gpucost.get_gpu("L4"))
    assert not fit.fits and fit.micro_batch is not None and fit.micro_batch < 112
    pred = gpucost.predict(p, gpu="L4")
    # The largest that fits sets the accumulation steps; the batch is split evenly over them.
    assert pred.batch_reduced_from == 112
    assert pred.grad_accum_steps == math.ceil(112 / fit.micro_batch)
    assert pred.batch_size == math.ceil(112 / pred.grad_accum_steps) <= fit.micro_batch
    assert pred.keeps_global_batch and pred.samples_per_step >= 112
    assert pred.memory.fits
    assert "does not fit L4" in pred.batch_note and "accumulation" in pred.batch_note
    shrink = gpucost.predict(p, gpu="L4", fit_batch="shrink")
    assert (shrink.batch_size, shrink.grad_accum_steps, shrink.keeps_global_batch) == (
        fit.micro_batch, 1, False)
    # The old behaviour on request, and an explicit batch is taken as given.
    assert gpucost.predict(p, gpu="L4", fit_batch="keep").batch_size == 112
    assert gpucost.predict(p, gpu="L4", batch_size=100).batch_reduced_from is None
    # Where it fits nothing changes.
    assert gpucost.predict(p, gpu="H100 SXM5 80GB").batch_reduced_from is None
    with pytest.raises(InputError, match="fit_batch"):
        gpucost.predict(p, gpu="L4", fit_batch="squeeze")


def test_a_mask_rcnn_from_an_80_gb_card_is_replanned_to_a_few_images_on_8_gb() -> None:
    """Mask R-CNN trains on 800x1333 images: its FPN keeps 256 channels at a quarter of that
    resolution, over a gigabyte an image, where SSD300's 300x300 inputs (the detector signature
    it once took) keep a quarter of one. Measured at 48 images on an A100 80 GB, an 8 GB card
    holds a few (Lambda's benchmark ran 2 there; the memory rule finds 4), not the 15 the SSD300
    rule left it."""
    p = Profile.from_measurement(gpu="A100 SXM4 80GB", throughput=60.0, batch_size=48,
                                 precision="tf32", param_count=44.4e6, name="Mask R-CNN R50-FPN")
    fit = gpucost.fit_memory(p, get_gpu("RTX 3070"))
    assert fit.basis == "signature" and not fit.fits
    assert fit.micro_batch is not None and 2 <= fit.micro_batch <= 6, fit.advice
    pred = gpucost.predict(p, gpu="RTX 3070")
    assert pred.batch_size <= 6 and pred.batch_reduced_from == 48
    assert gpucost.fit_memory(p, get_gpu("A100 SXM4 80GB")).fits


def test_cli_predict_says_which_batch_it_used(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    from gpucost.cli import main

    path = bert_large().save(tmp_path / "bert.json")
    assert main(["predict", "-p", str(path), "--gpu", "L4"]) == 0
    out = capsys.readouterr().out
    assert "batch 112 does not fit L4" in out and "keeps the global batch" in out


def test_cli_predict_names_the_architecture_a_profile_was_matched_to(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from gpucost.cli import main

    for params, size in ((192e6, "transformer-xl-base"), (283e6, "transformer-xl")):
        path = Profile.from_measurement(
            gpu="A100 SXM4 80GB", throughput=400.0, batch_size=16, precision="amp",
            param_count=params, name="Transformer-XL").save(tmp_path / f"{size}.json")
        assert main(["predict", "-p", str(path), "--gpu", "V100 SXM2 16GB"]) == 0
        assert f"workload      {size}: Transformer-XL" in capsys.readouterr().out


# ---- CPU-measured profiles ------------------------------------------------------------------
def test_a_cpu_profile_pays_a_gpu_hosts_launch_cost_not_its_own_host_time() -> None:
    cpu = Profile(gpu="CPU", precision="fp32", batch_size=8, step_time_s=3.0, param_count=1e6,
                  name="tiny", flops_per_sample=1e9, launches_per_step=400.0,
                  workload="cnn-classifier",
                  breakdown=StepBreakdown(data_s=0.01, host_s=1.5, compute_s=1.49))
    pred = gpucost.predict(cpu, gpu="T4")
    assert pred.breakdown.host_s == pytest.approx(translate.host_s_per_step(cpu))
    # 400 launches x a GPU host's eager dispatch (tens of microseconds), not the CPU's 1.5 s
    assert pred.breakdown.host_s < 0.025 < 1.5
    assert pred.breakdown.data_s == 0.01  # data loading as measured


def test_a_recommenders_batch_loader_pays_no_pipeline_time_per_sample() -> None:
    # NCF on a T4 measured at batch 1024 (8.7 ms a step, the Sia traces' AWS job). Its loader
    # slices whole batches from a table, so a 32x larger batch costs only the device's extra
    # work: the traces measured 21.3 ms at 32768 (12.6x the samples per second). Charged the
    # image and text families' ~26 us of Python per sample, it read 69.6 ms (4x).
    ncf = gpucost.Profile.from_measurement(gpu="T4", throughput=1024 / 0.0087, batch_size=1024,
                                           precision="fp32", param_count=6.6e6, name="NCF")
    assert translate.workload_signature(ncf).batch_loaded  # type: ignore[union-attr]
    large = gpucost.predict(ncf, batch_size=32768, fit_batch="keep")
    assert large.throughput > 8 * ncf.throughput
    # An image classifier's loader returns one item per call: its samples still pay for it.
    cnn = dataclasses.replace(ncf, name="a convnet", workload="cnn-classifier")
    assert not translate.workload_signature(cnn).batch_loaded  # type: ignore[union-attr]
    assert translate.workload_terms(cnn).host_s_per_flop > 0.0
    assert translate.workload_terms(ncf).host_s_per_flop == 0.0


def test_a_smaller_member_of_a_fitted_family_pays_its_step_costs_in_seconds() -> None:
    # ResNet-18 on 32x32 CIFAR images does ~14x less work per sample than the ResNet-50 on
    # ImageNet the "resnet" family was fitted on, but launches about as many kernels a step:
    # what its step pays whatever the batch is the family's in milliseconds, not the same
    # share of a 14x shorter step.
    def fixed_s(p: Profile) -> float:  # step(b) - (step(2b) - step(b))
        return 2 * p.step_time_s - gpucost.predict(p, batch_size=2 * p.batch_size,
                                                   fit_batch="keep").step_time_s

    r50 = gpucost.Profile.from_measurement(gpu="V100 SXM2 16GB", throughput=400.0,
                                           batch_size=128, precision="fp32",
                                           param_count=25.6e6, name="ResNet-50")
    r18 = dataclasses.replace(r50, name="ResNet-18 (CIFAR-10)", param_count=11.2e6,
                              step_time_s=r50.step_time_s / 14)
    assert fixed_s(r50) > 0.01
    assert 0.4 * fixed_s(r50) < fixed_s(r18) < r18.step_time_s


def test_cudnn_starts_an_lstms_time_step_kernels_at_a_driver_launch_each() -> None:
    # GNMT's eight LSTM layers run 50 time steps each as kernels cuDNN launches from one call
    # per layer and direction: a step dispatches a few hundred operators but launches ~1,500
    # kernels. Charged as framework dispatches, the host time was 58 ms a step whatever the
    # batch, most of a small-batch step on a fast GPU.
    gnmt = signature.builtin()["seq2seq-rnn"]
    steps, layer_directions = 50, 2 + 3 + 1 + 3  # bidirectional first layer, then 3 + 1 + 3
    calls = 2 * layer_directions  # one forward, one backward per layer and direction
    assert gnmt.library_launches_per_step == pytest.approx(
        3 * steps * layer_directions - calls, rel=0.01)  # 1 kernel a step forward, 2 backward
    assert gnmt.dispatched_launches_per_step < 0.2 * gnmt.launches_per_step
    cal = translate.calibration()
    scale = cal.signature_scale["fp16"]
    profile = Profile(gpu="CPU", precision="amp", batch_size=8, step_time_s=2.0,
                      param_count=160e6, name="GNMT v2")
    host = translate.host_s_per_step(profile)
    assert host == pytest.approx(gnmt.dispatched_launches_per_step * scale.host_s_per_launch
                                 + gnmt.library_launches_per_step * cal.launch_floor_s)
    # cuDNN's time-step kernels cost a driver launch each, less than a framework dispatch: they
    # take a smaller share of the host time than of the kernels.
    library_s = gnmt.library_launches_per_step * cal.launch_floor_s
    assert library_s / host < gnmt.library_launches_per_step / gnmt.launches_per_step
    # A model without recurrent layers dispatches every kernel it launches.
    assert signature.builtin()["encoder-only"].library_launches_per_step == 0.0


def _published(data: Path, model: str, gpu: str) -> tuple[float, int]:
    """Median 1-GPU amp throughput and batch of ``model`` on ``gpu`` in the Lambda table."""
    rows = []
    with (data / "benchmarks" / "lambda_throughput_calibration.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            if (row["model_key"], row["precision"], row["num_gpus"], row["gpu"]) == (
                    model, "amp", "1", gpu):
                rows.append((float(row["throughput"]), int(float(row["batch_size"]))))
    assert rows, f"no {model} amp row for {gpu}"
    return statistics.median(t for t, _ in rows), int(statistics.median(b for _, b in rows))


def _profile_on_cpu(model: object, batch: tuple[object, ...], name: str) -> Profile:
    import torch

    from gpucost.profiler import StepProfiler

    assert isinstance(model, torch.nn.Module)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    prof = StepProfiler(name=name, steps=2, warmup=1, trace_steps=1, model=model,
                        calibrate=False)
    with prof:
        prof.hook_optimizer(opt)
        for (x,) in prof.wrap(iter([batch] * 10)):
            model(x).float().square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    return prof.result()


@pytest.mark.slow
def test_a_resnet50_profiled_on_cpu_predicts_published_v100_and_a100(shared_data: Path) -> None:
    """A real ResNet-50 (scripts/build_signatures.py's definition) profiled on this CPU at
    batch 2, taken as an amp run, predicts the Lambda table's 1-GPU amp throughput on a V100
    and an A100 within 25 %."""
    import torch

    sys.path.insert(0, str(REPO / "scripts"))
    from build_signatures import ResNet50

    torch.manual_seed(0)
    profile = _profile_on_cpu(ResNet50(), (torch.randn(2, 3, 224, 224),), "resnet50")
    assert profile.gpu == "CPU" and profile.launches_per_step
    amp = profile.with_changes(precision="amp")  # the same step's counts; the target runs amp
    for gpu in ("V100 SXM2 16GB", "A100 SXM4 80GB"):
        published, batch = _published(shared_data, "resnet50", gpu)
        predicted = gpucost.predict(amp, gpu=gpu, batch_size=batch).throughput
        print(f"{gpu}: predicted {predicted:.0f}, published {published:.0f} images/s")
        assert predicted == pytest.approx(published, rel=0.25), gpu


@pytest.mark.slow
def test_a_small_vit_profiled_on_cpu_is_faster_on_an_rtx_4090_than_a_t4() -> None:
    from gpucost.profiler import build

    w = build("vit")
    x, _ = w.make_batch(32)
    profile = _profile_on_cpu(w.model, (x,), "small-vit")
    assert profile.environment["float32_matmul_precision"] == "highest"
    assert profile.workload is not None and "gemm" in profile.workload
    t4 = gpucost.predict(profile, gpu="T4")
    rtx = gpucost.predict(profile, gpu="RTX 4090")
    assert t4.breakdown.host_s == rtx.breakdown.host_s  # the same launches on a GPU host
    if profile.verdict is not None and profile.verdict.kind == "host-bound":
        assert rtx.step_time_s <= t4.step_time_s
    else:
        assert rtx.step_time_s < t4.step_time_s


def test_every_batch_lambdas_benchmark_ran_fits_by_the_memory_rule(shared_data: Path) -> None:
    """The memory rule against what ran: each (GPU, precision, per-GPU batch) of the Lambda
    tables, its workload's signature deciding the activations, fits that GPU. (Tacotron2's
    frame-by-frame LSTMs, counted with the CPU's fused layer, put 32 of its 52 rows at 1.3-1.5x
    the memory their GPUs have.)"""
    sys.path[:0] = [str(REPO / "scripts"), str(REPO / "bench")]
    import fit_calibration

    rows, _ = fit_calibration.load_lambda(fit_calibration.lambda_paths(shared_data), get_gpu)
    assert len(rows) > 300
    for row in rows:
        # measured on a larger GPU, so that no cap from the source's memory applies
        profile = Profile.from_measurement(
            gpu="H200 SXM 141GB", throughput=row.throughput, batch_size=row.batch_size,
            precision=row.precision, param_count=fit_calibration.FAMILY_PARAMS[row.model],
            name=fit_calibration.MODEL_NAMES[row.model])
        fit = gpucost.fit_memory(profile, get_gpu(row.gpu))
        assert fit.basis == "signature" and fit.fits, (row.model, row.gpu, row.precision,
                                                        row.batch_size, fit.advice)
