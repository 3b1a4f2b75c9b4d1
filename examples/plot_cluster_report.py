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
from skcce.cli._report import summarize_clusters, write_image_report
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
# as small PNG files first, and :func:`skcce.cli._report.write_image_report` (what
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
tile, gap = 8, 4  # one montage image: cheaper to draw than 170 small axes
montage = np.zeros((len(summaries) * (tile + gap), 17 * (tile + 1)))
fig, ax = plt.subplots(figsize=(10, 6.6))
for row, summary in enumerate(summaries):
    shown = list(summary.most) + [None] + list(summary.least)
    top = row * (tile + gap) + gap
    for col, i in enumerate(shown):
        if i is None:
            continue
        left = col * (tile + 1)
        montage[top : top + tile, left : left + tile] = digits.images[i]
        label = f"{confidence[i]:.2f}"
        ax.text(left + tile / 2, top - 0.7, label, ha="center", va="bottom", fontsize=6)
    name = f"cluster {summary.cluster}\n{summary.size} images\nmean {summary.mean_confidence:.2f}"
    ax.text(-1, top + tile / 2, name, ha="right", va="center", fontsize=7)
ax.imshow(montage, cmap="gray_r", interpolation="nearest")
ax.set_axis_off()
ax.set_title("most confident (left) and least confident (right) members of each cluster")
fig.subplots_adjust(left=0.1, right=0.99, bottom=0.01, top=0.95)
plt.show()

# %%
# The most confident members are clean, typical digits of one class; the least confident
# ones, far below the cluster's mean confidence, are ambiguous or badly written digits, often
# of other classes that the cluster has absorbed: the grid says at a glance which clusters
# to trust. For a folder of photos the command does all of the above:
# ``skcce cluster photos/ -k 20 --report out/``.
