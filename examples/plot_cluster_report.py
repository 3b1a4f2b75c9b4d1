"""
Looking at clusters: the report's per-cluster grids on digits
==============================================================

``skcce cluster photos/ -k 20 --report out/`` writes a static ``out/index.html`` that shows,
for every cluster (largest first), its size, its mean confidence and a grid of its most and
its least confident images. This example builds that report for scikit-learn's digits and
draws the same grids here: the most confident members of a cluster show what it is about,
the least confident ones where it blurs into its neighbours.

Confidence is a sample's largest predicted cluster probability (``predict_proba(X).max(1)``).
"""

# %%
# Cluster the digits' 64 raw pixels (one restart, to keep the example fast).
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import torch
from PIL import Image
from sklearn.datasets import load_digits

from skcce import CCEClustering
from skcce._report import summarize_clusters, write_image_report
from skcce.metrics import clustering_accuracy

torch.set_num_threads(1)  # the docs build runs on few shared cores

digits = load_digits()
X, y = digits.data.astype(np.float32), digits.target
cce = CCEClustering(n_clusters=10, n_init=1, random_state=0)
labels = cce.fit_predict(X)
confidence = cce.predict_proba(X).max(axis=1)
print(f"accuracy {clustering_accuracy(y, labels):.3f} (labels only used for this line)")

# %%
# The report. The command line writes it from a folder of images; here the digits are saved
# as small PNG files first, and :func:`skcce._report.write_image_report` (what
# ``--report`` calls) writes ``index.html`` and its thumbnails. Open the file in any browser:
# it needs no server and no internet.
folder = tempfile.mkdtemp(prefix="skcce-digits-")
paths = []
for i, image in enumerate(digits.images):
    path = os.path.join(folder, f"digit_{i:04d}.png")
    Image.fromarray((image * (255 / 16)).astype(np.uint8)).save(path)
    paths.append(path)
index = write_image_report(
    os.path.join(folder, "report"), paths, labels, confidence, 10, title="digits, 10 clusters"
)
print("report:", os.path.relpath(index, folder), "in", folder)

# %%
# The same content drawn here: one row per cluster, largest first, with its size and mean
# confidence; the 8 most confident members on the left, the 8 least confident on the right.
summaries = summarize_clusters(labels, confidence, 10)
fig, axes = plt.subplots(len(summaries), 17, figsize=(10, 7.2), layout="constrained")
for row, summary in zip(axes, summaries, strict=True):
    shown = list(summary.most) + [None] + list(summary.least)
    for ax, i in zip(row, shown + [None] * (17 - len(shown)), strict=True):
        ax.set_axis_off()
        if i is not None:
            ax.imshow(digits.images[i], cmap="gray_r")
            ax.set_title(f"{confidence[i]:.2f}", fontsize=6, pad=1)
    name = f"cluster {summary.cluster}\n{summary.size} images\nmean {summary.mean_confidence:.2f}"
    row[0].text(-0.3, 0.5, name, transform=row[0].transAxes, ha="right", va="center", fontsize=7)
fig.suptitle("most confident (left) and least confident (right) members of each cluster")
plt.show()

# %%
# The most confident members are clean, typical digits of one class; the least confident
# ones, far below the cluster's mean confidence, are ambiguous or badly written digits, often
# of other classes that the cluster has absorbed: the grid says at a glance which clusters
# to trust. For a folder of photos the command does all of the above:
# ``skcce cluster photos/ -k 20 --report out/``.
