"""Every sync waits for the slowest rank: the expected maximum of R step times."""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucost.errors import ProfileError
from gpucost.model import scaling
from gpucost.model.perf import predict, step_time_cv, using_calibration
from gpucost.model.translate import calibration, shipped_calibration_data
from gpucost.profile import Profile

REPO = Path(__file__).resolve().parents[1]


def small_model(**changes: object) -> Profile:
    """A step whose gradient sync over NVLink is negligible (10k parameters): what a group of
    these loses is the wait alone."""
    p = Profile.from_measurement(gpu="H100 SXM5 80GB", throughput=1000.0, batch_size=100,
                                 precision="bf16", param_count=1e4)
    return p.with_changes(**changes)


def test_expected_maximum_of_normal_draws() -> None:
    e = scaling.expected_max_normal
    assert e(1) == 0.0
    # Closed forms for two and three draws: 1/sqrt(pi) and 3/(2 sqrt(pi)).
    assert e(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    assert e(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-9)
    # Harter's (1961) table of expected normal order statistics: 1.02938 for 4, 1.42360 for 8.
    assert e(4) == pytest.approx(1.02938, abs=1e-5)
    assert e(8) == pytest.approx(1.42360, abs=1e-5)
    # Below sqrt(2 ln R), the classical bound, and approaching it as R grows.
    shares = [e(r) / math.sqrt(2 * math.log(r)) for r in (8, 64, 512, 4096)]
    assert shares == sorted(shares) and shares[-1] < 1.0


def test_a_group_waits_for_its_slowest_gpu() -> None:
    p = small_model()
    cv = calibration().scaling.straggler_cv
    assert cv > 0
    one = predict(p)
    for gpus in (2, 4, 8):
        group = predict(p, gpus_per_node=gpus)
        # The step grows by cv x E[max of the group's draws] of one GPU's step.
        expected = 1.0 / (1.0 + cv * scaling.expected_max_normal(gpus))
        assert group.efficiency == pytest.approx(expected, rel=1e-3)
        assert group.breakdown.communication_s == pytest.approx(
            group.step_time_s - one.step_time_s, rel=1e-6)
    eight = predict(p, gpus_per_node=8)
    many = predict(p, gpus_per_node=8, nodes=8, inter_node_gbps=3200.0)
    assert many.efficiency < eight.efficiency


def test_a_profile_that_measured_its_spread_uses_its_own() -> None:
    steady = small_model(step_time_p10_s=0.1, step_time_p90_s=0.1)
    assert step_time_cv(steady) == 0.0
    assert predict(steady, gpus_per_node=8).efficiency == pytest.approx(1.0, abs=1e-3)
    # p90 - p10 of a normal is 2.563 standard deviations: a 10 % coefficient of variation.
    spread = 0.1 * 0.1 * 2 * 1.2815515655446004
    varied = small_model(step_time_p10_s=0.1 - spread / 2, step_time_p90_s=0.1 + spread / 2)
    assert step_time_cv(varied) == pytest.approx(0.1, rel=1e-9)
    assert predict(varied, gpus_per_node=8).efficiency == pytest.approx(
        1 / (1 + 0.1 * scaling.expected_max_normal(8)), rel=1e-3)
    # A CPU's step times say nothing of a GPU's, nor a group's (it already waited) of one GPU's.
    cpu = small_model(gpu="CPU", flops_per_sample=1e9, step_time_p10_s=0.05,
                      step_time_p90_s=0.2)
    assert step_time_cv(cpu) == calibration().scaling.straggler_cv
    group = small_model(device_count=8, step_time_p10_s=0.05, step_time_p90_s=0.2)
    assert step_time_cv(group) == calibration().scaling.straggler_cv


@pytest.mark.parametrize(("gpu", "params"), [("H100 SXM5 80GB", 1e4), ("RTX 4090", 3e8)])
def test_a_measured_group_translates_back_to_itself(gpu: str, params: float) -> None:
    # Measured on 8 GPUs, the step includes the sync (a 1.2 GB one over PCIe for 300 M
    # parameters) and the wait: predicting the same group gives it back, and one GPU alone runs
    # faster than an eighth of the group.
    group = Profile.from_measurement(gpu=gpu, throughput=800.0, batch_size=100,
                                     precision="amp", param_count=params, device_count=8)
    assert predict(group, gpus_per_node=8).throughput == pytest.approx(800.0, rel=1e-6)
    assert predict(group).throughput > 100.0 * (1 + 1e-3)


@settings(max_examples=200, deadline=None)
@given(c=st.floats(1e-4, 1e2), s=st.floats(0.0, 1e2), g=st.floats(1.0, 20.0),
       wait=st.floats(0.0, 0.5))
def test_a_measured_step_gives_back_its_work(c: float, s: float, g: float,
                                             wait: float) -> None:
    step = scaling.overlapped_s(c, s, g) + wait * c
    if c > 0.05 * step * 1.01 and s < 0.9 * step:  # away from the clamp, and the step moves
        assert scaling.compute_given_step_s(step, s, g, wait) == pytest.approx(c, rel=1e-6)


def test_inverted_percentiles_are_refused() -> None:
    with pytest.raises(ProfileError, match=r"step_time_p90_s .* below step_time_p10_s"):
        small_model(step_time_p10_s=0.2, step_time_p90_s=0.1)


@pytest.fixture
def fitting() -> object:
    sys.path.insert(0, str(REPO / "scripts"))
    import fit_calibration

    return fit_calibration


def test_the_fit_recovers_the_variation_runs_were_made_with(fitting: object) -> None:
    fitc = fitting
    made = 0.12
    shipped = shipped_calibration_data()
    with using_calibration({**shipped, "scaling": {**shipped["scaling"], "straggler_cv": made}}):
        runs = []
        for model, gpu, gpus in (("resnet50", "A100 SXM4 80GB", 2), ("bert_large_squad",
                                 "V100 SXM2 16GB", 4), ("tacotron2", "RTX 3090", 8),
                                 ("ssd", "H100 SXM5 80GB", 8)):
            one = fitc.Obs("v1", model, "fp16", gpu, 500.0, 32)
            probe = fitc.OneNodeRun(one, gpus, 1.0)
            runs.append(fitc.OneNodeRun(one, gpus, fitc.one_node_ratio(probe)))
    assert fitc.fit_straggler_cv(runs, shipped) == pytest.approx(made, abs=2e-3)


def test_the_loss_grows_like_the_expected_maximum(shared_data: Path, fitting: object) -> None:
    """Lambda's runs of 2, 4 and 8 NVLink GPUs in one machine: what a platform (GPU and bench
    version) loses beyond the modelled sync, read as a coefficient of variation through E[max
    of R], moves less between group sizes than read as a loss per GPU beyond the first, or as
    one fixed loss (median spread over platforms 1.7 against 2.8 and 3.5)."""
    from gpucost.catalog import get_gpu

    fitc = fitting
    runs = fitc.nvlink_runs(fitc.load_one_node_runs(fitc.lambda_paths(shared_data), get_gpu),
                            get_gpu)
    shipped = shipped_calibration_data()
    excess: dict[tuple[str, str], dict[int, list[float]]] = {}
    with using_calibration({**shipped, "scaling": {**shipped["scaling"], "straggler_cv": 0.0}}):
        for run in runs:
            if run.gpus in (2, 4, 8):
                excess.setdefault((run.one.gpu, run.one.version), {}).setdefault(
                    run.gpus, []).append(fitc.one_node_ratio(run) - 1)
    platforms = [by_size for by_size in excess.values() if len(by_size) >= 2]
    assert len(platforms) >= 5

    def spread(shape: dict[int, float]) -> float:
        spreads = []
        for by_size in platforms:
            medians = [statistics.median(v) / shape[r] for r, v in by_size.items()]
            spreads.append(max(medians) / min(medians))
        return statistics.median(spreads)

    as_maximum = spread({r: scaling.expected_max_normal(r) for r in (2, 4, 8)})
    assert as_maximum < 2.0
    assert as_maximum < spread({r: r - 1.0 for r in (2, 4, 8)}) / 1.4
    assert as_maximum < spread({r: 1.0 for r in (2, 4, 8)}) / 1.8


def test_runs_with_peer_copies_off_are_dated_by_their_logs(fitting: object) -> None:
    """Lambda's benchmark script exported NCCL_P2P_DISABLE=1 from 2022-10-16 until 2023-02-06;
    a run's log is named by its start."""
    fitc = fitting
    assert fitc.p2p_disabled("pytorch/results/x/PyTorch_bert/19-11-2022_04-10-55.txt")
    assert fitc.p2p_disabled("pytorch/results/x/PyTorch_bert/16-10-2022_00-00-00.txt")
    assert not fitc.p2p_disabled("pytorch/results/x/PyTorch_bert/06-02-2023_10-00-00.txt")
    assert not fitc.p2p_disabled("pytorch/results/x/PyTorch_bert/15-10-2022_23-59-59.txt")
    assert not fitc.p2p_disabled("pytorch/results/x/PyTorch_bert/*.txt")


def test_a_run_with_peer_copies_off_crossed_the_host(tmp_path: Path, fitting: object) -> None:
    """One 1-GPU run and two 8-GPU runs of the same job on an NVLink board, one inside the
    window: they stay apart (not one median), and the one inside syncs through the host."""
    from gpucost.catalog import get_gpu

    fitc = fitting
    table = tmp_path / "lambda.csv"
    header = "model_key,precision,gpu,num_gpus,batch_size,throughput,source_path,bench_version"
    rows = [("1", "64", "100", "01-03-2024_00-00-00"), ("8", "512", "780", "01-03-2024_00-00-00"),
            ("8", "512", "500", "19-11-2022_00-00-00")]
    table.write_text(header + "\n" + "".join(
        f"bert_large_squad,fp16,A100 SXM4 80GB,{n},{b},{t},results/{d}.txt,v1\n"
        for n, b, t, d in rows))
    runs = fitc.load_one_node_runs(table, get_gpu)
    assert sorted((r.throughput, r.link) for r in runs) == [(500.0, "pcie"), (780.0, None)]
    assert [fitc.link_kind(r, get_gpu) for r in sorted(runs, key=lambda r: r.throughput)] == [
        "pcie", "nvlink"]
    assert [r.throughput for r in fitc.nvlink_runs(runs, get_gpu)] == [780.0]
    by_link = {r.link: fitc.one_node_ratio(r) for r in runs}
    # Through the host the same gradients take longer: the prediction is slower, nearer 500.
    assert by_link["pcie"] * 500.0 < by_link[None] * 780.0


def test_peer_copies_off_cost_what_the_host_path_costs(shared_data: Path,
                                                       fitting: object) -> None:
    """In Lambda's data the NVLink runs inside the window lose far more than those outside it,
    and more the larger the gradient: BERT-large's lose more than ResNet-50's."""
    from gpucost.catalog import get_gpu

    fitc = fitting
    runs = fitc.load_one_node_runs(fitc.lambda_paths(shared_data), get_gpu)

    def efficiency(link: str | None, model: str) -> float:
        return statistics.median(
            r.throughput / (r.gpus * r.one.throughput) for r in runs
            if r.link == link and r.one.model == model
            and get_gpu(r.one.gpu).form_factor.startswith("SXM"))

    assert efficiency("pcie", "bert_large_squad") < efficiency(None, "bert_large_squad") - 0.15
    assert (efficiency(None, "resnet50") - efficiency("pcie", "resnet50")
            < efficiency(None, "bert_large_squad") - efficiency("pcie", "bert_large_squad"))
