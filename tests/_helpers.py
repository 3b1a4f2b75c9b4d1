"""Data and settings shared by several test modules (import as ``from _helpers import ...``)."""

import numpy as np
from sklearn.datasets import make_blobs

#: float32's unit roundoff, 2**-24
U32 = float(np.finfo(np.float32).eps) / 2

#: a small VGG-4 trained by Adam: one restart, one epoch, batches of 20 images
VGG4_ADAM = dict(
    model="vgg4",
    optimizer="adam",
    learning_rate=1e-3,
    max_epochs=1,
    batch_size=20,
    n_init=1,
    augment=None,
    random_state=0,
)


def float32_blobs(n_samples, n_features, cluster_std):
    """Three well separated Gaussian blobs as float32 features, and their classes."""
    X, y = make_blobs(
        n_samples=n_samples,
        centers=3,
        n_features=n_features,
        cluster_std=cluster_std,
        random_state=0,
    )
    return X.astype(np.float32), y


def float32_logit_bound(model, X):
    """How far one evaluation of a fitted linear head's float32 logits on ``X`` may be from
    another's, per entry: a bound for comparing probabilities across CPUs, BLAS kernels or
    memory layouts.

    The logits ``z = W x + b`` are computed in float32 by the BLAS (MKL's SGEMM in torch's
    x86 wheels), whose kernel, and so its summation order and use of FMA, depends on the CPU
    and on the operands' layout: on AMD CPUs MKL runs its generic code path, on Intel CPUs
    its AVX2 or AVX-512 kernels (see .ci/run). Everything else of predict_proba is exact or
    float64: the normalised batch is rounded to float32 once, identically everywhere, and the
    softmax is taken in float64. A length-d float32 dot product in any order is within
    ``gamma_d = d u`` of the exact value relative to ``sum |terms|`` (worst case: too loose
    to see a change of 1e-4 in one weight), and in practice within about ``sqrt(d) u`` of it
    (rounding errors add like a random walk; Higham and Mary, 2019). Each evaluation is taken
    to be within ``sqrt(d + 1) u (|W||x| + |b|)`` of the exact logits, so two of them within
    twice that. Measured on tests/test_compat.py's pickle (MKL's generic, Intel AVX2 and
    SSE4.2 paths on one machine): at most 2.2 u (|W||x| + |b|), against the bound's 16.1.
    """
    layer = model.module_
    x = model._inputs.batch(X, slice(0, len(X)), "cpu", "flat").double().numpy()
    W = layer.weight.detach().double().numpy()
    b = layer.bias.detach().double().numpy()
    magnitude = np.abs(x) @ np.abs(W).T + np.abs(b)
    return 2 * np.sqrt(W.shape[1] + 1) * U32 * magnitude


def assert_proba_within_float32(actual, expected, logit_bound):
    """``actual`` and ``expected`` softmax rows differ by no more than logits ``logit_bound``
    apart allow: ``log p_k = z_k - logsumexp(z)`` moves by at most ``2 max_j |dz_j|``, so
    ``|p_k - p'_k| <= p'_k expm1(2 max_j |dz_j|)`` (plus float64 rounding of the softmax)."""
    tol = expected * np.expm1(2 * logit_bound.max(axis=1, keepdims=True)) + 1e-15
    excess = np.abs(actual - expected) - tol
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert (excess <= 0).all(), (
        f"predict_proba differs from the expected values by more than float32 rounding "
        f"allows: at {worst}, |{actual[worst]!r} - {expected[worst]!r}| > {tol[worst]:.3g}"
    )


def count_default_augmentation(monkeypatch, views):
    """Make ``skcce.models.default_augmentation`` append the shape of every batch it is
    given to ``views`` (it still augments)."""
    import skcce.models

    built_in = skcce.models.default_augmentation

    def counting(input_shape):
        aug = built_in(input_shape)

        def counted(x, **kwargs):
            views.append(tuple(x.shape))
            return aug(x, **kwargs)

        return counted

    monkeypatch.setattr(skcce.models, "default_augmentation", counting)
