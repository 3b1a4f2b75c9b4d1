"""The pure helpers of benchmarks/bench_scale.py: the mixture generator and the exponent fit."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_scale  # noqa: E402


@pytest.mark.parametrize("n,k", [(10_000, 10), (10_000, 1000), (12_345, 100), (50, 7), (7, 7)])
@pytest.mark.parametrize("kind", ["balanced", "zipf"])
def test_sizes_sum_to_n_decrease_and_fill_every_cluster(n, k, kind):
    sizes = bench_scale.cluster_sizes(n, k, kind)
    assert sizes.shape == (k,)
    assert sizes.sum() == n
    assert sizes.min() >= 1
    assert np.all(np.diff(sizes) <= 0)
    if kind == "balanced":
        assert sizes.max() - sizes.min() <= 1
    elif n >= bench_scale.MIN_SIZE * k:
        assert sizes.min() >= bench_scale.MIN_SIZE


def test_zipf_sizes_follow_one_over_rank():
    sizes = bench_scale.cluster_sizes(100_000, 100, "zipf", min_size=0)
    ranks = np.arange(1, 101)
    slope = np.polyfit(np.log(ranks[:50]), np.log(sizes[:50]), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.02)
    assert sizes[0] > 10 * sizes[-1]


def test_mixture_is_float32_seeded_and_labelled_as_the_sizes():
    X, y = bench_scale.make_mixture(3000, 16, 20, "zipf", seed=3, chunk=1000)
    assert X.dtype == np.float32 and X.shape == (3000, 16)
    assert np.array_equal(np.sort(np.bincount(y, minlength=20))[::-1],
                          bench_scale.cluster_sizes(3000, 20, "zipf"))
    assert np.array_equal(y, bench_scale.mixture_labels(3000, 20, "zipf", seed=3))
    X2, _ = bench_scale.make_mixture(3000, 16, 20, "zipf", seed=3)  # chunking does not matter
    assert np.array_equal(X, X2)
    X3, _ = bench_scale.make_mixture(3000, 16, 20, "zipf", seed=4)
    assert not np.array_equal(X, X3)
    # unit noise around the centres
    centred = X - np.stack([X[y == c].mean(0) for c in range(20)])[y]
    assert centred.std() == pytest.approx(1.0, abs=0.05)


def test_exponent_fit_recovers_a_known_slope_with_one_intercept_per_group():
    rng = np.random.default_rng(0)
    groups, xs, ys = [], [], []
    for g, scale in enumerate([0.01, 3.0, 50.0]):
        for x in [1e4, 3e4, 1e5, 3e5]:
            groups.append(g)
            xs.append(x)
            ys.append(scale * x**1.3 * np.exp(0.01 * rng.standard_normal()))
    slope, used = bench_scale.fit_exponent(groups, xs, ys)
    assert slope == pytest.approx(1.3, abs=0.03)
    assert used == 12
    # a group with one point carries no slope; non-positive values are dropped
    slope, used = bench_scale.fit_exponent([0, 0, 1, 2], [10, 100, 10, 10], [1, 10, 5, -1])
    assert slope == pytest.approx(1.0) and used == 2
    assert np.isnan(bench_scale.fit_exponent([0], [10], [1])[0])


def test_cells_past_the_limit_make_larger_cells_inferred():
    cell = dict(dataset="balanced", n=10_000, d=64, k=1000, method="cce_fit", device="cpu",
                threads=None)
    rec = dict(cell, status="timeout", limit_s=300.0, key=bench_scale.cell_key(cell))
    records = {rec["key"]: rec}
    bigger = dict(cell, n=100_000, d=256)
    assert bench_scale.dominated_by_timeout(bigger, records, 300.0) is rec
    assert bench_scale.dominated_by_timeout(bigger, records, 600.0) is None  # longer limit
    assert bench_scale.dominated_by_timeout(dict(cell, k=100), records, 300.0) is None
    assert bench_scale.dominated_by_timeout(dict(bigger, method="kmeans"), records, 300) is None


def test_report_shows_ratios_limits_unavailable_rows_and_cells_not_run():
    def rec(method, status="ok", **kw):
        cell = dict(dataset="balanced", n=10_000, d=64, k=10, method=method, device="cpu",
                    threads=None, seed=0, spread=0.5, min_size=5)
        out = dict(cell, key=bench_scale.cell_key(cell), status=status, command="python x",
                   when="2026-01-01T00:00:00")
        if status == "ok":
            out.update(time_s=1.0, cpu_s=1.0, acc=0.9, nmi=0.8, n_empty=0, peak_rss_mib=300.0,
                       peak_minus_data_mib=10.0)
        out.update(kw)
        return out

    records = {r["key"]: r for r in [
        rec("kmeans", time_s=2.0),
        rec("cce_fit", acc=0.95),
        rec("cce_partial", status="na", note="CCEClustering has no partial_fit"),
        rec("faiss", status="timeout", limit_s=240.0),
    ]}
    text = bench_scale.report(records, ["- machine"], None, 0.5, 5)
    row = "| 10,000 | 64 | 10 | CCEClustering.fit | cpu | default | 1 | 1 | 0.50 | 0.950 | +0.050 |"
    assert row in text
    assert "not available" in text and "> 240 (limit)" in text
    assert "Cells of the grid not run yet" in text
    assert "| balanced | 1,000,000 | 256 | 1000 | all |" in text
    missing = bench_scale.missing_cells(records)
    assert ("balanced", 10_000, 64, 10, ["minibatch", "minibatch_partial"]) in missing
