"""The interior point's row-block inverses in O(m) storage (``skcce.solvers._kernels._blocks``).

Each stored inverse must act as the dense inverse of ``diag + a a' + delta 1 1'`` does: its
products, entries and total, for small rows (kept dense) and wide ones (diagonal plus rank
two), including the ill-conditioned blocks of tied classes (a tiny diagonal).
"""

import numpy as np
import pytest

pytest.importorskip("numba")

from skcce.solvers._kernels import _blocks as bk  # noqa: E402


def _block(rng, n1, tiny=False):
    diag = rng.uniform(1e-8, 1e-6, n1) if tiny else rng.uniform(0.1, 10.0, n1)
    slopes = rng.standard_normal(n1) * 3.0
    delta = float(rng.uniform(0.01, 5.0))
    dense = np.diag(diag) + np.outer(slopes, slopes) + delta * np.ones((n1, n1))
    return diag, slopes, delta, dense


@pytest.mark.parametrize("n1", [1, 2, 3, 7, 60])
@pytest.mark.parametrize("tiny", [False, True])
def test_stored_inverse_acts_as_the_dense_inverse(n1, tiny):
    rng = np.random.default_rng(n1 + 100 * tiny)
    diag, slopes, delta, dense = _block(rng, n1, tiny)
    o = 5  # a row stored after others in the flat buffer
    buf = np.full(o + bk.length(n1) + 3, np.nan)
    assert bk.invert(diag, slopes, delta, n1, buf, o)
    assert np.isnan(buf[:o]).all() and np.isnan(buf[o + bk.length(n1) :]).all()
    rhs = rng.standard_normal(n1)
    out = np.zeros(n1)
    total = bk.apply(buf, o, n1, rhs, out)
    # the product solves the dense system (a residual check: G itself is ill-conditioned
    # when the diagonal is tiny, the solve it gives must still be a solve)
    scale = np.abs(dense).max() * np.abs(out).max() + np.abs(rhs).max()
    np.testing.assert_allclose(dense @ out, rhs, atol=1e-9 * scale)
    assert total == pytest.approx(out.sum(), rel=1e-12, abs=1e-12 * np.abs(out).max())
    G = np.array([[bk.entry(buf, o, n1, p, q) for q in range(n1)] for p in range(n1)])
    np.testing.assert_allclose(G, G.T, rtol=1e-10, atol=1e-10 * np.abs(G).max())
    if not tiny:
        np.testing.assert_allclose(G, np.linalg.inv(dense), rtol=1e-9, atol=1e-12)
        assert bk.total(buf, o, n1) == pytest.approx(np.linalg.inv(dense).sum(), rel=1e-9)


def test_wide_rows_are_stored_in_linear_space():
    assert [bk.length(n) for n in (1, 2)] == [1, 4]  # dense, closed form
    assert bk.length(999) == 2 * 999 + 4  # a dense inverse would be 998 001 values


@pytest.mark.parametrize("n1", [1, 2, 5])
def test_not_positive_definite_is_refused(n1):
    diag = np.full(n1, -1.0 if n1 > 2 else -100.0)
    slopes = np.zeros(n1)
    assert not bk.invert(diag, slopes, 0.0, n1, np.zeros(bk.length(n1)), 0)
    diag[:] = np.nan
    assert not bk.invert(diag, slopes, 1.0, n1, np.zeros(bk.length(n1)), 0)


@pytest.mark.parametrize("n1", [3, 7, 60])
def test_low_rank_factors_rebuild_the_inverse(n1):
    """``G = diag(E) - f1 f1' - f2 f2'``: the factors the Schur complement is summed from."""
    rng = np.random.default_rng(n1)
    diag, slopes, delta, dense = _block(rng, n1)
    buf = np.zeros(bk.length(n1))
    assert bk.invert(diag, slopes, delta, n1, buf, 0)
    f1, f2 = np.zeros(n1), np.zeros(n1)
    s1, s2 = bk.low_rank_factors(buf, 0, n1, f1, f2)
    rebuilt = np.diag(buf[:n1]) - np.outer(f1, f1) - np.outer(f2, f2)
    np.testing.assert_allclose(rebuilt, np.linalg.inv(dense), rtol=1e-9, atol=1e-12)
    assert (s1, s2) == pytest.approx((f1.sum(), f2.sum()), rel=1e-12)


@pytest.mark.parametrize("lam_per_row", [0.5, 20.0])
def test_schur_complement_summed_by_rows_or_product_solves_as_conjugate_gradients(lam_per_row):
    """The dense Newton system (wide rows summed entry by entry, or by one matrix product
    when they hold most classes: a strong pull fills every row) and the matrix-free one
    reach the same certified optimum."""
    from skcce.solvers import _kernels as kn

    rng = np.random.default_rng(3)
    N, K = 60, 12
    logits = rng.standard_normal((N, K)) * 1.5
    P = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    u = np.full(K, 1.0 / K)
    start = kn.start_labels(P, u, False)
    dense = kn.ipm_solve(P, u, lam_per_row * N, False, start, 1e-9, 200, 1)
    free = kn.ipm_solve(P, u, lam_per_row * N, False, start, 1e-9, 200, 2)
    assert dense[4] and free[4]
    assert dense[1] == pytest.approx(free[1], rel=1e-8)
    np.testing.assert_allclose(dense[0], free[0], atol=1e-4)
