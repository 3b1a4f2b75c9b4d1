"""
Choosing λ with GridSearchCV, with and without labels
=====================================================

``lam`` (λ) weighs the fairness term :math:`\\lambda\\, KL(u \\| \\bar y)` of the pseudo-label
step against the collision cross-entropy summed over the batch (the supplement's convention:
λ = 100 with batches of 250). With λ = 0 every sample takes its most likely cluster; a very
large λ forces the pseudo-labels of every batch to split evenly whatever the data say.

Two label-free scores can rank the values of λ in a
:class:`~sklearn.model_selection.GridSearchCV`: :meth:`skcce.CCEClustering.score`, the mutual
information between samples and clusters under the model,
:math:`I = H(\\bar\\sigma) - \\frac1N \\sum_i H(\\sigma_i)`, and the agreement between
the fit's restarts (``restart_agreement_``: the mean adjusted Rand index of the kept restart's
labels with the others'). Measured over 30 searches on other data (user guide, "Restarts and
choosing λ without labels"), the agreement picked a λ within 0.01 of the best accuracy more
often (24 of 30 against 18), but neither is reliable: keep λ = 100 unless the search shows a
clear difference. When some labels are available, a scorer such as the adjusted Rand index can
be used instead. This example runs one search with the three scorers and compares their
choices.
"""

# %%
# One search, three scorers
# -------------------------
# ``GridSearchCV`` fits on two folds and scores on the held-out third; ``predict`` assigns
# the held-out digits to clusters. ``"agreement"`` reads the fit's restart agreement and
# ``"mutual information"`` calls the estimator's own ``score`` (neither uses labels);
# ``"ARI"`` compares the predicted clusters with the held-out labels. To keep the page fast
# every fit is three restarts (the fewest that the agreement needs) of 5 epochs.
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score, make_scorer
from sklearn.model_selection import GridSearchCV, KFold

from skcce import CCEClustering

torch.set_num_threads(1)

X, y = load_digits(return_X_y=True)
lams = [0.0, 1.0, 10.0, 100.0, 1000.0]


def mutual_information(estimator, X, y=None):
    """The estimator's label-free score (GridSearchCV passes y; it is not used)."""
    return estimator.score(X)


def agreement(estimator, X, y=None):
    """How much the fit's restarts agree (label-free; X and y are not used)."""
    return estimator.restart_agreement_.max()


scorers = {
    "agreement": agreement,
    "mutual information": mutual_information,
    "ARI": make_scorer(adjusted_rand_score),
}
search = GridSearchCV(
    CCEClustering(n_clusters=10, n_init=3, max_epochs=5, random_state=0),
    {"lam": lams},
    scoring=scorers,
    refit="agreement",
    cv=KFold(3, shuffle=True, random_state=0),
)
search.fit(X, y)  # y reaches only the ARI scorer: CCEClustering.fit ignores it

results = search.cv_results_
for i, lam in enumerate(lams):
    print(
        f"lam={lam:>7g}  " + "  ".join(f"{k} {results[f'mean_test_{k}'][i]:.3f}" for k in scorers)
    )
for key in scorers:
    print(f"chosen by {key}: lam={lams[int(np.argmax(results[f'mean_test_{key}']))]:g}")

# %%
# Score against λ
# ---------------
# λ = 0 is plotted at the left edge of the logarithmic axis. The mutual information (nats)
# has its own axis; the ARI and the agreement are both chance-corrected indices.
x = np.array([lam if lam > 0 else 0.1 for lam in lams])
fig, ax_mi = plt.subplots(figsize=(7, 4), layout="constrained")
ax_ari = ax_mi.twinx()
for ax, key, color, label in (
    (ax_mi, "mutual information", "tab:blue", "mutual information (nats, no labels)"),
    (ax_ari, "ARI", "tab:orange", "ARI with labels; agreement (dashed, no labels)"),
    (ax_ari, "agreement", "tab:green", None),
):
    mean, std = results[f"mean_test_{key}"], results[f"std_test_{key}"]
    style = "--" if key == "agreement" else "-"
    ax.errorbar(x, mean, yerr=std, marker="o", color=color, capsize=3, linestyle=style)
    if label:
        ax.set_ylabel(label, color=color)
ax_mi.set_xscale("log")
ax_mi.set_xticks(x, ["0"] + [f"{lam:g}" for lam in lams[1:]])
ax_mi.set_xlabel("lam (λ)")
ax_mi.set_title("Held-out score of CCEClustering on digits (3-fold mean ± std)")
plt.show()

# %%
# On digits the scores change little with λ, and the label-free choices need not match the
# labelled one: that is what "neither is reliable" means in practice. Clusters do not
# collapse even at λ = 0, because the network loss keeps its own fairness term on the mean
# prediction (``fairness_weight=1.3`` by default; ``fairness_weight=0`` gives the bare Algorithm 1,
# where λ alone prevents collapse). Differences between neighbouring values of λ are within
# the spread over folds, so read the plot as a check that the defaults sit in a flat region
# rather than as a sharp optimum.
#
# The refitted estimator
# ----------------------
# With ``refit="agreement"`` the search refits the label-free choice on all the data.
best = search.best_estimator_
print("refitted with lam =", best.lam, "; training score", round(best.score(X), 3))
print("cluster sizes:", np.sort(np.bincount(best.labels_, minlength=10)))
