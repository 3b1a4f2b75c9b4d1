"""The benchmark scripts' own logic: the fit's phases add up, the tables show the ratios."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_fit_phases  # noqa: E402
import bench_solver_tol  # noqa: E402
from bench_scale import make_mixture  # noqa: E402


def test_fit_phases_add_up_to_the_fit_and_the_timers_are_removed():
    from skcce._engine import _batched, _build, _fused

    before = (_build.init_head, _batched._Batched.solve_all, _fused.collision_step)
    X, _ = make_mixture(600, 8, 5, "balanced", seed=0)
    seconds, total, epochs = bench_fit_phases._phases(X, 5, 0)
    assert set(seconds) == set(bench_fit_phases.PHASES)
    assert sum(seconds.values()) == pytest.approx(total)
    for name in ("start", "solves", "loss and gradient", "rest of the steps"):
        assert seconds[name] > 0, name
    assert 2 <= epochs <= 10  # the epoch stop needs two epochs' labels
    assert (_build.init_head, _batched._Batched.solve_all, _fused.collision_step) == before


def test_fit_phases_table_reads_epochs_in_lloyd_iterations():
    seconds = dict.fromkeys(bench_fit_phases.PHASES, 1.0)
    rows = [((1000, 8, 10), (seconds, 6.0, 3, 2.0, 20))]
    table = bench_fit_phases.report(rows, "torch's default")
    # training = 3 s over 3 epochs = 1 s an epoch; KMeans 0.1 s an iteration: 10 of them
    assert "| 1,000 | 8 | 10 | 6 (3×) | 1 | 1 | 1 | 1 | 1 | 1 | 3 | 1 (10) | 2, 20 |" in table


def test_solver_tol_table_shows_ratios_and_uncertified_batches():
    result = {"acc": 0.5, "seconds": 2.0, "iters": 100.0, "uncertified": 0.0}
    rows = [("10000:64:100:zipf", {"kmeans": {**result, "seconds": 1.0},
                                    "auto": result, "1e-5": {**result, "uncertified": 2.0}})]
    table = bench_solver_tol.report(rows, [0], ["auto", "1e-5"], "1")
    assert "| 10000 × 64 zipf | 100 | 0.500, 1 | 0.500, 2 (2×), 100 | " in table
    assert "0.500, 2 (2×), 100 (2 uncertified) |" in table


def test_epochs_table_has_a_column_per_count():
    rows = [
        ("digits", [(1, 0.5, 0.25), (3, 0.75, 1.0), (2, 0.625, 0.5)]),
        ((1000, 8, 4), [(1, 0.1, 2.0), (3, 0.2, 3.0), (3, 0.2, 3.5)]),
    ]
    table = bench_fit_phases.report_epochs(rows, [1, 3], 0, "1")
    assert "| data | K | E = 1: acc, s | E = 3: acc, s | default: acc, s (epochs) |" in table
    assert "| digits | 10 | 0.500, 0.25 | 0.750, 1 | 0.625, 0.5 (2) |" in table
    assert "| 1,000 × 8 | 4 | 0.100, 2 | 0.200, 3 | 0.200, 3.5 (3) |" in table
