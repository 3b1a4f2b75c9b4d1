"""Property-based tests (hypothesis) of CCEClustering fit/predict over random shapes, scales and
dtypes, and of how solve_pseudo_labels reads its input.

The solvers' own properties (any valid probabilities, priors with zeros, ties, every method)
are in tests/test_solvers.py; here only what it does not cover: the storage of ``probs``.
Examples are small (tens of samples, one epoch, one restart) so the file runs in seconds;
the profile in conftest.py makes them the same on every run.
"""

import warnings

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from skcce import CCEClustering
from skcce.solvers import solve_pseudo_labels

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# the float range each dtype can hold the draws in: (lowest, highest) decimal exponent
EXPONENTS = {np.float16: (-3, 2), np.float32: (-20, 20), np.float64: (-20, 20), np.int64: (0, 12)}


@st.composite
def datasets(draw):
    """(X, n_clusters, batch_size): mixtures, constant columns, duplicates, offsets."""
    n = draw(st.integers(1, 40))
    d = draw(st.integers(1, 6))
    k = draw(st.integers(1, min(n, 5)))
    dtype = draw(st.sampled_from(list(EXPONENTS)))
    exponent = draw(st.integers(*EXPONENTS[dtype]))
    rng = np.random.RandomState(draw(st.integers(0, 2**16)))
    centres = rng.randn(k, d) * draw(st.sampled_from([0.0, 1.0, 10.0]))
    X = centres[rng.randint(k, size=n)] + rng.randn(n, d)
    if draw(st.booleans()):
        X[:, rng.randint(d)] = rng.randn()  # a constant column
    if draw(st.booleans()) and n > 2:
        X[: n // 2] = X[0]  # many duplicate rows
    X = X + draw(st.sampled_from([0.0, 0.0, 100.0]))
    X = X * 10.0**exponent
    if dtype is np.int64:
        X = np.rint(X)
    return X.astype(dtype), k, draw(st.sampled_from([7, 16, 64]))


def _fit(X, k, batch_size, **params):
    est = CCEClustering(
        n_clusters=k, max_epochs=1, n_init=1, batch_size=batch_size, random_state=0, **params
    )
    with warnings.catch_warnings():
        # a collapse is allowed here, with its warning (tests/test_bad_input.py checks it);
        # any numerical RuntimeWarning (overflow, invalid value) is a failure
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", message="all .* samples of X are identical")
        warnings.simplefilter("error", RuntimeWarning)
        est.fit(X)
        P = est.predict_proba(X)
        labels = est.predict(X)
    return est, P, labels


@SETTINGS
@given(datasets(), st.integers(0, 2**16))
def test_fit_predict_valid_for_any_input(data, seed):
    X, k, batch_size = data
    est, P, labels = _fit(X, k, batch_size)
    n = len(X)
    assert est.labels_.shape == (n,)
    assert est.labels_.min() >= 0 and est.labels_.max() < k
    assert P.shape == (n, k) and P.dtype == np.float64
    assert np.isfinite(P).all() and (P >= 0).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(labels, P.argmax(axis=1))
    np.testing.assert_array_equal(est.labels_, labels)  # fit's labels are predict's
    score = est.score(X)
    assert -1e-9 <= score <= np.log(k) + 1e-9
    # new samples inside the range of the training data
    rng = np.random.RandomState(seed)
    lo, hi = X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64)
    P_new = est.predict_proba((lo + (hi - lo) * rng.rand(5, X.shape[1])).astype(X.dtype))
    assert np.isfinite(P_new).all()
    np.testing.assert_allclose(P_new.sum(axis=1), 1.0, atol=1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 30),
    st.integers(1, 5),
    st.integers(-100, 100),
    st.sampled_from([np.float32, np.float64]),
    st.integers(0, 2**16),
)
def test_power_of_two_rescaling_changes_nothing(n, d, power, dtype, seed):
    # the normalisation divides by a power of two first: X * 2**p gives the same network
    # inputs bit for bit, hence the same fit, for any p that keeps X in the dtype's range
    rng = np.random.RandomState(seed)
    X = (rng.randn(n, d) * 3 + rng.randn(d)).astype(dtype)
    k = min(n, 3)
    _, P, labels = _fit(X, k, 16)
    _, P2, labels2 = _fit(X * dtype(2.0**power), k, 16)
    np.testing.assert_array_equal(labels2, labels)
    np.testing.assert_array_equal(P2, P)


# ----- solve_pseudo_labels: the storage of probs --------------------------------------------
@st.composite
def stored_probs(draw):
    n = draw(st.integers(1, 12))
    k = draw(st.integers(1, 6))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    scale = draw(st.sampled_from([0.0, 1.0, 5.0, 40.0]))
    P = torch.softmax(scale * torch.randn(n, k, generator=g, dtype=torch.float64), dim=1)
    storage = draw(st.sampled_from(["transposed", "fortran", "read-only", "list", "half"]))
    lam = draw(st.sampled_from([0.0, 1.0, 100.0, 1e4]))
    return P, storage, lam


def _store(P, storage):
    if storage == "transposed":
        return P.T.contiguous().T  # a non-contiguous tensor view
    if storage == "fortran":
        return np.asfortranarray(P.numpy())
    if storage == "read-only":
        arr = P.numpy().copy()
        arr.flags.writeable = False
        return arr
    if storage == "list":
        return P.tolist()
    return P.to(torch.float16)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stored_probs())
def test_solver_reads_any_storage(case):
    P, storage, lam = case
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's warning on non-writable arrays
        res = solve_pseudo_labels(_store(P, storage), lam=lam, max_iter=300)
    Y = res.labels
    assert Y.dtype == torch.float64 and Y.shape == P.shape
    assert bool(torch.isfinite(Y).all()) and bool((Y >= 0).all())
    torch.testing.assert_close(Y.sum(dim=1), torch.ones(len(P), dtype=torch.float64))
    if storage == "half":
        return
    ref = solve_pseudo_labels(P, lam=lam, max_iter=300)
    if storage == "transposed":
        # the same numbers in another memory order: reductions may round differently, so
        # compare through the certificates: F(Y) - F* <= gap for both
        bound = res.gap + ref.gap + 1e-12 * max(1.0, abs(ref.objective))
        assert abs(res.objective - ref.objective) <= bound
    else:  # copied into the same contiguous float64 tensor: the same answer, bit for bit
        torch.testing.assert_close(Y, ref.labels, rtol=0, atol=0)
        assert res.converged == ref.converged
