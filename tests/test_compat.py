"""A model pickled by skcce 0.1.0 (before the package was reorganised) still loads and predicts.

``tests/data/cce_v0_1_0_digits.pkl`` was written by the 0.1.0 code as::

    X = load_digits().data[:300]
    CCEClustering(n_clusters=3, max_epochs=2, random_state=0, n_init=1).fit(X)

and pickled with protocol 4. It names the old private modules (``skcce._clustering``,
``skcce._training.Inputs``), which must stay importable.
"""

import copy
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from _helpers import assert_proba_within_float32, float32_logit_bound
from sklearn.datasets import load_digits

from skcce import CCEClustering

PICKLE = Path(__file__).parent / "data" / "cce_v0_1_0_digits.pkl"

# predict_proba of the 0.1.0 model on load_digits().data[1000:1008], as printed at pickling
EXPECTED_PROBA = np.array(
    [
        [0.1203245014366112, 0.08348516847235246, 0.7961903300910363],
        [0.00930697840681069, 0.09081321139587516, 0.8998798101973141],
        [0.01926014842526979, 0.9767813418341915, 0.00395850974053871],
        [0.870168983298163, 0.06359535953209283, 0.06623565716974414],
        [0.24595940564509705, 0.02584433226497321, 0.7281962620899297],
        [0.00842809404934774, 0.9888728440628851, 0.00269906188776706],
        [0.6117837438953022, 0.18846896087313147, 0.19974729523156629],
        [0.00436044804958045, 0.9925441752222155, 0.003095376728204],
    ]
)
EXPECTED_LABELS = [2, 2, 1, 0, 2, 1, 0, 1]


def _load():
    with open(PICKLE, "rb") as fh:
        return pickle.load(fh)


def test_old_pickle_loads_and_predicts_identically():
    model = _load()
    assert isinstance(model, CCEClustering)
    X = load_digits().data[1000:1008]
    bound = float32_logit_bound(model, X)
    assert_proba_within_float32(model.predict_proba(X), EXPECTED_PROBA, bound)
    assert model.predict(X).tolist() == EXPECTED_LABELS
    assert model.n_iter_ == 2
    # fitted attributes read back from the pickle, not recomputed: exact on any machine
    assert model.train_score_ == 0.6559910495583567


def test_old_pickle_round_trips():
    model = _load()
    again = pickle.loads(pickle.dumps(model))
    X = load_digits().data[1000:1008]
    bound = float32_logit_bound(again, X)
    assert_proba_within_float32(again.predict_proba(X), EXPECTED_PROBA, bound)
    # the same process, CPU and libraries: a round trip changes no bit
    assert again.predict_proba(X).tobytes() == model.predict_proba(X).tobytes()
    for name, value in model.module_.state_dict().items():
        assert torch.equal(again.module_.state_dict()[name], value), name


@pytest.mark.parametrize("relative", [1e-4, -1e-4])
def test_tolerance_still_sees_a_changed_weight(relative):
    """The float32 tolerance is no blanket: one weight of the head changed by a relative
    1e-4 fails the comparison, as does a bias moved by 1e-4.

    The weight is the one that weighs most in these rows' logits (largest ``|W_kj x_ij|``);
    a weight whose feature is 0 in all eight rows (the largest ``|W_kj|`` is one) cannot
    change their probabilities at all. The bound allows logits to move by at most 8e-6 here,
    so the comparison sees any change that moves a logit by a few 1e-5 (about half of all
    single weights changed by 1e-4 do).
    """
    model = _load()
    X = load_digits().data[1000:1008]
    bound = float32_logit_bound(model, X)
    changed = copy.deepcopy(model)
    x = model._inputs.batch(X, slice(0, len(X)), "cpu", "flat")
    with torch.no_grad():
        weight = changed.module_.weight
        use = (weight[None, :, :] * x[:, None, :]).abs().amax(dim=0)  # (K, d)
        k, j = np.unravel_index(int(use.argmax()), tuple(use.shape))
        weight[k, j] *= 1 + relative
    with pytest.raises(AssertionError, match="more than float32 rounding allows"):
        assert_proba_within_float32(changed.predict_proba(X), EXPECTED_PROBA, bound)

    moved = copy.deepcopy(model)
    with torch.no_grad():
        moved.module_.bias[0] += 1e-4 * np.sign(relative)
    with pytest.raises(AssertionError, match="more than float32 rounding allows"):
        assert_proba_within_float32(moved.predict_proba(X), EXPECTED_PROBA, bound)


def test_tolerance_holds_under_another_summation_order():
    """The expected values against logits summed in another order (float32, row by row, no
    BLAS): a stand-in for another CPU's kernel, on any machine."""
    model = _load()
    X = load_digits().data[1000:1008]
    x = model._inputs.batch(X, slice(0, len(X)), "cpu", "flat")
    W, b = model.module_.weight.detach(), model.module_.bias.detach()
    for order in (slice(None), slice(None, None, -1)):  # forwards and backwards
        z = torch.zeros(len(X), W.shape[0], dtype=torch.float32)
        for j in range(W.shape[1])[order]:
            z += x[:, j : j + 1] * W[:, j]
        z += b
        proba = torch.softmax(z.double(), dim=1).numpy()
        assert_proba_within_float32(proba, EXPECTED_PROBA, float32_logit_bound(model, X))


RELEASE_PICKLE = Path(__file__).parent / "data" / "cce_release_digits.pkl"
# predict_proba of a model pickled by the 0.1.0 release as shipped (the parameters before
# solver_options: CCEClustering(n_clusters=3, max_epochs=2, random_state=0, n_init=1,
# solver_tol=1e-6) fitted on load_digits().data[:300]), on load_digits().data[1000:1008]
RELEASE_PROBA = np.array(
    [
        [0.12031367883220306, 0.08342903154062097, 0.7962572896271759],
        [0.009298995561581236, 0.09088332755147777, 0.899817676886941],
        [0.01924918706584215, 0.9767966547008092, 0.003954158233348734],
        [0.8702065617196729, 0.06354691738107057, 0.06624652089925663],
        [0.24589974031680994, 0.025855224955671413, 0.7282450347275187],
        [0.008431167907809997, 0.9888712997399126, 0.002697532352277385],
        [0.611797850519192, 0.1883793586047346, 0.19982279087607352],
        [0.004358282364608645, 0.9925493376976661, 0.003092379937725244],
    ]
)


def test_release_pickle_loads_with_solver_options_and_refits():
    with open(RELEASE_PICKLE, "rb") as fh:
        model = pickle.load(fh)
    X = load_digits().data[1000:1008]
    bound = float32_logit_bound(model, X)
    assert_proba_within_float32(model.predict_proba(X), RELEASE_PROBA, bound)
    params = model.get_params()
    # solver_tol=1e-6 carried over, and the release's cap of 100 iterations (the default
    # became 200) kept as its own
    assert params["solver_options"] == {"tol": 1e-6, "max_iter": 100}
    assert not {"solver", "solver_tol", "solver_max_iter", "em_tol", "em_max_iter"} & set(params)
    # the loaded estimator is a valid one: it clones and fits again
    from sklearn.base import clone

    refit = clone(model).set_params(max_epochs=1).fit(load_digits().data[:200])
    assert refit.labels_.shape == (200,)
