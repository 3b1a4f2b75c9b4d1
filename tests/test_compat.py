"""A model pickled by skcce 0.1.0 (before the package was reorganised) still loads and predicts.

``tests/data/cce_v0_1_0_digits.pkl`` was written by the 0.1.0 code as::

    X = load_digits().data[:300]
    CCEClustering(n_clusters=3, max_epochs=2, random_state=0, n_init=1).fit(X)

and pickled with protocol 4. It names the old private modules (``skcce._clustering``,
``skcce._training.Inputs``), which must stay importable.
"""

import pickle
from pathlib import Path

import numpy as np
from numpy.testing import assert_allclose
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
    assert_allclose(model.predict_proba(X), EXPECTED_PROBA, rtol=0, atol=1e-12)
    assert model.predict(X).tolist() == EXPECTED_LABELS
    assert model.n_iter_ == 2
    assert_allclose(model.train_score_, 0.6559910495583567, rtol=1e-12)


def test_old_pickle_round_trips():
    model = _load()
    again = pickle.loads(pickle.dumps(model))
    X = load_digits().data[1000:1008]
    assert_allclose(again.predict_proba(X), EXPECTED_PROBA, rtol=0, atol=1e-12)
