"""
Choosing the number of clusters: ``n_clusters="auto"`` and its curve
====================================================================

``CCEClustering(n_clusters="auto")`` fits one clustering for every K of ``n_clusters_range``
(each with at least three restarts) and keeps the K with the highest criterion: the agreement
of the restarts (reproducible: restarts find the same partition when K matches the data's
groups) times the crispness of the kept clustering (its label-free mutual information over
:math:`(\\log K)^{0.7}`, a little less than its maximum :math:`\\log K`, so that equally
crisp finer partitions score a little more). A K whose fit emptied a cluster scores 0. The
chosen number is ``n_clusters_``; the whole curve is ``n_clusters_scores_`` (K → criterion),
so that it can be plotted, compared and overruled. On a range of seven K or more the search
first screens every K with 4 restarts and fits only the 4 best again with all of theirs; the
others keep their screening value, and ``n_clusters_restarts_`` says which K is which.

This example searches K = 2..10 on two data sets whose number of classes is known: five
Gaussian blobs in 20 dimensions, and scikit-learn's wine data (13 chemical measurements of
three cultivars, standardised). The labels are used only to print the scores.

From the command line the same search is ``skcce cluster emb.npy -k auto --n-clusters-range
2 10 --report out/``; the report shows this curve with the chosen K marked.
"""

# %%
# One search per data set
# -----------------------
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_wine, make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from skcce import CCEClustering

torch.set_num_threads(1)  # the docs build runs on few shared cores

X_blobs, y_blobs = make_blobs(
    n_samples=1000, centers=5, n_features=20, cluster_std=2.0, random_state=0
)
wine = load_wine()
datasets = {
    "20-D blobs (5 centres)": (X_blobs.astype(np.float32), y_blobs),
    "wine, standardised (3 cultivars)": (
        StandardScaler().fit_transform(wine.data).astype(np.float32),
        wine.target,
    ),
}

fitted = {}
for name, (X, y) in datasets.items():
    cce = CCEClustering(n_clusters="auto", n_clusters_range=(2, 10), random_state=0).fit(X)
    fitted[name] = cce
    curve = ", ".join(f"{k}: {v:.2f}" for k, v in cce.n_clusters_scores_.items())
    print(f"{name}: chose K = {cce.n_clusters_} (true {len(np.unique(y))})")
    print(f"  criterion by K: {curve}")
    print(f"  adjusted Rand index with the classes: {adjusted_rand_score(y, cce.labels_):.3f}")

# %%
# The curves
# ----------
# Each curve is ``n_clusters_scores_``; the star marks ``n_clusters_``, the K with the highest
# criterion; hollow points are K left at the screening pass. A flat curve or a second K almost
# as high says that the data support more than one answer; a curve that stays low everywhere
# (below 0.25) means that no K stands out, and ``fit`` warns
# (``skcce._n_clusters.NoStructureWarning``; with ``n_clusters_range=(1, ...)`` K = 1 is the
# answer instead).
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
for ax, (name, cce) in zip(axes, fitted.items(), strict=True):
    ks = sorted(cce.n_clusters_scores_)
    ax.plot(ks, [cce.n_clusters_scores_[k] for k in ks], marker="o", label="criterion")
    most = max(cce.n_clusters_restarts_.values())
    screened = [k for k in ks if cce.n_clusters_restarts_[k] < most]
    if screened:  # hollow: the value of the screening pass (fewer restarts)
        ax.plot(
            screened, [cce.n_clusters_scores_[k] for k in screened], marker="o",
            markerfacecolor="white", linestyle="none", color="C0", label="screening only",
        )  # fmt: skip
    k = cce.n_clusters_
    ax.plot(
        [k], [cce.n_clusters_scores_[k]], marker="*", markersize=18, linestyle="none",
        color="C3", label=f"chosen: K = {k}", clip_on=False, zorder=3,
    )  # fmt: skip
    ax.set_xticks(ks)
    ax.set_ylim(0, max(1.05, 1.05 * max(cce.n_clusters_scores_.values())))
    ax.set_xlabel("number of clusters K")
    ax.set_title(name)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
axes[0].set_ylabel("criterion (higher is better)")
fig.tight_layout()
plt.show()

# %%
# Overruling the choice
# ---------------------
# The curve is a guide, not a verdict: when the task calls for another granularity (or a
# second peak looks as plausible), fit with an integer K. An integer ``n_clusters`` fits
# exactly that K, as without ``"auto"``; ``n_clusters_`` is then that integer. On the command
# line: ``skcce cluster emb.npy -k 4``.
X_wine, y_wine = datasets["wine, standardised (3 cultivars)"]
cce4 = CCEClustering(n_clusters=4, random_state=0).fit(X_wine)
print(f"wine with K = {cce4.n_clusters_}: cluster sizes {np.bincount(cce4.labels_).tolist()}")
