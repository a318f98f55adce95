"""Pure parts of the profiler: the verdict rules' invariants, the summary format, NVML fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucost.profile import VERDICTS, OperatorStat, Profile, StepBreakdown, Verdict
from gpucost.profiler.summary import summary_lines
from gpucost.profiler.verdict import DATALOADER_FRACTION, HOST_FRACTION, StepFacts, decide

GOLDEN = Path(__file__).resolve().parent / "golden" / "profile_summary.txt"

seconds = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
operators = st.lists(st.builds(OperatorStat, name=st.just("aten::op"), calls=st.just(1),
                               time_s=seconds, flops=st.floats(0, 1e12),
                               bytes_moved=st.floats(0, 1e10)), max_size=5)


@given(step=st.floats(min_value=1e-6, max_value=10.0), data=seconds, host=seconds,
       ops=operators, ridge=st.none() | st.floats(min_value=0.1, max_value=1e3))
def test_verdict_rules_hold_for_any_step(step: float, data: float, host: float,
                                         ops: list[OperatorStat], ridge: float | None) -> None:
    data, host = min(data, step), min(host, step - min(data, step))
    v = decide(StepFacts(step_s=step, data_s=data, host_s=host, ops_per_step=100, operators=ops,
                         flops_per_step=None, bytes_per_step=None, ridge_flop_per_byte=ridge))
    assert v.kind in VERDICTS and v.reason and v.advice
    # the data loader is blamed exactly when it takes its share, and then a faster GPU is
    # never the advice; a host-bound step likewise
    assert (v.kind == "dataloader-bound") == (data / step >= DATALOADER_FRACTION)
    if v.kind != "dataloader-bound":
        busy = max(step - data, 1e-12)
        assert (v.kind == "host-bound") == (host / busy >= HOST_FRACTION)
    if v.kind in ("dataloader-bound", "host-bound"):
        assert v.advice.startswith("a faster GPU will not help")


def test_summary_format_matches_the_golden_file() -> None:
    p = Profile(
        gpu="CPU", precision="fp32", batch_size=32, step_time_s=0.0125, param_count=669706.0,
        name="mlp", sample_unit="images", step_time_p10_s=0.012, step_time_p90_s=0.014,
        flops_per_sample=3.2e6, peak_memory_gb=0.0108,
        breakdown=StepBreakdown(data_s=0.0005, host_s=0.001, compute_s=0.009, optimizer_s=0.002),
        operators=(OperatorStat("aten::addmm", 3, 0.006, 1e8, 4e6),
                   OperatorStat("aten::mm", 5, 0.002, 1e8, 4e6)),
        verdict=Verdict("compute-bound", "most operator time is in matmuls",
                        "a faster GPU helps"),
        max_batch_size=4096, steps_measured=20, partial=True,
        environment={"device": "cpu", "cpu_count": 2, "load_avg_1m": 7.5})
    assert "\n".join(summary_lines(p)) + "\n" == GOLDEN.read_text(encoding="utf-8")
    quiet = p.with_changes(environment={"device": "cpu", "cpu_count": 2, "load_avg_1m": 0.5})
    assert not any(line.startswith("warning") for line in summary_lines(quiet))


def test_the_cli_lists_every_builtin_model() -> None:
    pytest.importorskip("torch")
    from gpucost.cli.profile import MODELS
    from gpucost.profiler.models import MODEL_NAMES

    assert MODELS == MODEL_NAMES


def test_nvml_degrades_silently_without_an_nvidia_gpu() -> None:
    pytest.importorskip("torch")
    import torch

    from gpucost.profiler.nvml import NvmlSampler, driver_version

    if torch.cuda.is_available():
        pytest.skip("an NVIDIA GPU is present")
    sampler = NvmlSampler()
    sampler.start()
    assert sampler.stop() == {}
    assert driver_version() is None


def test_environment_names_versions_and_measures_this_device() -> None:
    pytest.importorskip("torch")
    import torch

    from gpucost.profiler.environment import describe

    env = describe(torch.device("cpu"))
    assert env["torch"] == torch.__version__ and env["cpu_model"]
    assert "cuda" in env and isinstance(env["cuda_arch_list"], list)
    assert env["cpu_matmul_gflops"] > 0.1 and env["device_mem_bw_gbs"] > 0.1
    assert 0.05 < env["launch_floor_us"] < 1000
