"""
CCEClustering, KMeans and a Gaussian mixture on the digits
==========================================================

Three clusterings of scikit-learn's 8x8 digits (1797 images, 10 classes), all fitted on the
raw pixels without looking at the labels:

* :class:`skcce.CCEClustering` — a linear head trained by collision cross-entropy
  self-labeling (its default settings, 3 restarts to keep this page fast);
* :class:`sklearn.cluster.KMeans` with 10 restarts;
* :class:`sklearn.mixture.GaussianMixture` with diagonal covariances.

The labels are used only afterwards, to score each partition with the clustering accuracy
(best one-to-one matching of clusters to classes, :func:`skcce.metrics.clustering_accuracy`),
the normalised mutual information (NMI) and the adjusted Rand index (ARI).
"""

# %%
# Data and the three models
# -------------------------
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score, confusion_matrix, normalized_mutual_info_score
from sklearn.mixture import GaussianMixture

from skcce import CCEClustering
from skcce.metrics import cluster_class_matching, clustering_accuracy

torch.set_num_threads(1)  # small data: one thread is as fast, and the docs build shares cores

X, y = load_digits(return_X_y=True)
print(X.shape, "classes:", np.unique(y))

models = {
    "CCEClustering": CCEClustering(n_clusters=10, n_init=3, random_state=0),
    "KMeans": KMeans(n_clusters=10, n_init=10, random_state=0),
    "GaussianMixture": GaussianMixture(n_components=10, covariance_type="diag", random_state=0),
}
labels = {}
for name, model in models.items():
    start = time.perf_counter()
    labels[name] = model.fit_predict(X)
    seconds = time.perf_counter() - start
    print(
        f"{name:16s} accuracy {clustering_accuracy(y, labels[name]):.3f}  "
        f"NMI {normalized_mutual_info_score(y, labels[name]):.3f}  "
        f"ARI {adjusted_rand_score(y, labels[name]):.3f}  ({seconds:.1f} s)"
    )

# %%
# The scores are from one seed of each method; ``docs/benchmarks.md`` has means and spreads
# over several seeds, measured by ``benchmarks/bench_vs_kmeans.py``.
#
# Confusion matrices
# ------------------
# Cluster numbers are arbitrary. :func:`skcce.metrics.cluster_class_matching` gives the
# matching of clusters to classes that the accuracy uses; renaming every cluster by its
# matched class puts the correctly clustered images on the diagonal.


def matched(y_true, y_pred):
    mapping = cluster_class_matching(y_true, y_pred)
    return np.array([mapping.get(c, -1) for c in y_pred])


fig, axes = plt.subplots(1, 3, figsize=(13, 4.4), layout="constrained")
for ax, (name, pred) in zip(axes, labels.items(), strict=True):
    cm = confusion_matrix(y, matched(y, pred), labels=np.arange(10))
    ax.imshow(cm, cmap="Blues")
    for (i, j), count in np.ndenumerate(cm):
        if count:
            color = "white" if count > cm.max() / 2 else "black"
            ax.text(j, i, count, ha="center", va="center", fontsize=7, color=color)
    ax.set_title(f"{name}: accuracy {clustering_accuracy(y, pred):.2f}")
    ax.set_xlabel("cluster (named by its matched class)")
    ax.set_xticks(range(10))
    ax.set_yticks(range(10))
axes[0].set_ylabel("true digit")
plt.show()

# %%
# Cluster sizes
# -------------
# The fairness term :math:`\lambda\, KL(u \| \bar y)` of the pseudo-label step pulls every
# mini-batch towards equally used clusters, which suits a data set with balanced classes
# like this one; ``prior=`` sets another target distribution.
for name, pred in labels.items():
    print(f"{name:16s} cluster sizes {np.sort(np.bincount(pred, minlength=10))}")
