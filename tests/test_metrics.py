"""Tests for skcce.metrics: clustering accuracy and the Hungarian matching."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skcce.metrics import cluster_class_matching, clustering_accuracy


def _brute_force(y_true, y_pred):
    """Best accuracy over every partial one-to-one map clusters -> classes."""
    clusters = sorted(set(y_pred.tolist()))
    classes = sorted(set(y_true.tolist()))
    n = len(y_true)
    best = 0
    # pad classes with None so that clusters may stay unmatched
    targets = classes + [None] * len(clusters)
    for perm in itertools.permutations(targets, len(clusters)):
        m = dict(zip(clusters, perm, strict=True))
        hits = sum(1 for t, p in zip(y_true, y_pred, strict=True) if m[p] == t)
        best = max(best, hits)
    return best / n


def test_hand_computed():
    assert clustering_accuracy([0, 0, 1, 1], [1, 1, 0, 0]) == 1.0
    assert clustering_accuracy([0, 0, 1, 1, 1], [0, 0, 0, 0, 1]) == pytest.approx(0.6)
    # all samples in one cluster: the majority class
    assert clustering_accuracy([0, 1, 1, 2, 2, 2], [7] * 6) == pytest.approx(0.5)


def test_more_clusters_than_classes_counts_unmatched_as_errors():
    y_true = np.array([0, 0, 0, 1, 1, 1])
    y_pred = np.array([0, 0, 1, 2, 2, 3])  # 4 clusters, 2 classes
    # best: cluster 0 -> class 0 (2 hits), cluster 2 -> class 1 (2 hits); clusters 1, 3 unmatched
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(4 / 6)
    m = cluster_class_matching(y_true, y_pred)
    assert m == {0: 0, 2: 1}


def test_fewer_clusters_than_classes():
    y_true = np.array([0, 1, 2, 2])
    y_pred = np.array([5, 5, 5, 5])
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(0.5)
    assert cluster_class_matching(y_true, y_pred) == {5: 2}


def test_matching_is_one_to_one_and_consistent_with_accuracy():
    rng = np.random.default_rng(0)
    y_true = rng.integers(0, 4, 60)
    y_pred = rng.integers(0, 6, 60)
    m = cluster_class_matching(y_true, y_pred)
    assert len(set(m.values())) == len(m)
    hits = sum(1 for t, p in zip(y_true, y_pred, strict=True) if m.get(int(p)) == t)
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(hits / 60)


def test_string_labels_and_torch_inputs():
    torch = pytest.importorskip("torch")
    assert clustering_accuracy(["a", "b", "b"], ["x", "y", "y"]) == 1.0
    assert clustering_accuracy(torch.tensor([0, 1, 1]), torch.tensor([1, 0, 0])) == 1.0


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda kc: st.integers(1, 5).flatmap(
            lambda kp: st.lists(
                st.tuples(st.integers(0, kc - 1), st.integers(0, kp - 1)), min_size=1, max_size=12
            )
        )
    )
)
def test_against_brute_force(pairs):
    y_true = np.array([t for t, _ in pairs])
    y_pred = np.array([p for _, p in pairs])
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(_brute_force(y_true, y_pred))


@pytest.mark.parametrize(
    ("y_true", "y_pred", "match"),
    [
        ([], [], "empty"),
        ([0, 1], [0], "same length"),
        ([[0, 1], [1, 0]], [0, 1], "1-D"),
        ([0, 1], [[0, 1, 2]], "1-D"),
        ([0.0, np.nan], [0, 1], "NaN"),
    ],
)
def test_bad_input(y_true, y_pred, match):
    with pytest.raises(ValueError, match=match):
        clustering_accuracy(y_true, y_pred)
    with pytest.raises(ValueError, match=match):
        cluster_class_matching(y_true, y_pred)


def test_mutual_information_bounds_and_hand_values():
    from skcce.metrics import mutual_information

    assert mutual_information(np.eye(3)) == pytest.approx(np.log(3))  # confident and even
    assert mutual_information(np.tile([1.0, 0.0, 0.0], (5, 1))) == 0.0  # collapsed
    p = np.array([[0.9, 0.1], [0.1, 0.9]])
    h_rows = -(0.9 * np.log(0.9) + 0.1 * np.log(0.1))
    assert mutual_information(p) == pytest.approx(np.log(2) - h_rows)
    with pytest.raises(ValueError, match="shape"):
        mutual_information(np.ones(3))
