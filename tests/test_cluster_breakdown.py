"""bench/held_out_cluster_breakdown.py splits the held-out-cluster figure of
bench/prediction_accuracy.py by cluster, job and placement kind: its groups must add up to
that figure, model and floor alike, or the breakdown describes some other question."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
TRACES = DATA / "benchmarks" / "sia_step_times_calibration.csv"

pytestmark = pytest.mark.skipif(not TRACES.exists(), reason="../shared/data is not present")


@pytest.mark.slow
def test_the_breakdown_adds_up_to_the_held_out_cluster_figure(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import fit_calibration as fitc
    import held_out_cluster_breakdown as breakdown
    import prediction_accuracy as bench

    rows = [r for r in fitc.load_sia(TRACES) if r.cluster in fitc.SIA_CLUSTERS]
    groups = breakdown.group_errors(rows, bench.trace_times(TRACES))
    errors = bench.held_out_clusters(DATA)
    capsys.readouterr()
    model = [m for errs in groups.values() for m, _ in errs]
    floor = [f for errs in groups.values() for _, f in errs]
    assert len(model) == len(errors[bench.SAME_BATCH])
    assert statistics.mean(model) == pytest.approx(statistics.mean(errors[bench.SAME_BATCH]))
    assert statistics.mean(floor) == pytest.approx(
        statistics.mean(errors["floor (true sync)"]))
    assert {kind for _, _, kind in groups} == {"one node", "two nodes", "3+ nodes"}


@pytest.mark.slow
def test_the_bounds_ask_the_held_out_questions(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-sample fit of a cluster is the one the other cluster's held-out question was
    asked with (two clusters: fitted on the same rows), and the 2-GPU scaling asks every
    held-out question but those of the 2-GPU placement it learns from."""
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import fit_calibration as fitc
    import held_out_cluster_breakdown as breakdown
    import prediction_accuracy as bench

    rows = [r for r in fitc.load_sia(TRACES) if r.cluster in fitc.SIA_CLUSTERS]
    own = breakdown.own_fit(rows)
    (first, second) = sorted(fitc.SIA_CLUSTERS)
    assert own[first][0] == pytest.approx(bench.refit_without_cluster(rows, second).socket_gbs)
    assert own[second][0] == pytest.approx(bench.refit_without_cluster(rows, first).socket_gbs)
    uniform = [r for r in rows if len(set(r.placement)) == 1]
    assert sum(len(errs) for _, errs in own.values()) == len(uniform)
    model, scaled = breakdown.scaled_by_two_gpus(rows)
    assert len(model) == len(scaled) == len([r for r in uniform if r.placement != (2,)])
    assert model != scaled


@pytest.mark.slow
def test_a_held_out_cluster_is_asked_without_its_own_overlap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The overlap exponent is fitted on the traces' jobs as the socket bandwidth is: a cluster
    held out must be asked with the other cluster's, not the shipped one its own jobs helped
    fit."""
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import fit_calibration as fitc
    import prediction_accuracy as bench

    from gpucost.catalog import get_gpu
    from gpucost.model import translate

    rows = [r for r in fitc.load_sia(TRACES) if r.cluster in fitc.SIA_CLUSTERS]
    for held in fitc.SIA_CLUSTERS:
        others = [r for r in rows if r.cluster != held]
        _, jobs = fitc.fit_scaling(others, get_gpu)
        assert {c for c, _ in jobs} == {r.cluster for r in others}
        refit = bench.refit_without_cluster(rows, held)
        assert refit.overlap_gamma == fitc.median_overlap_gamma(jobs)
        assert refit.calibration["scaling"]["overlap_gamma"] == refit.overlap_gamma
        shipped = translate.shipped_calibration_data()["scaling"]["overlap_gamma"]
        assert refit.overlap_gamma != shipped
