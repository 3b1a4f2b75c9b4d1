"""Data and settings shared by several test modules (import as ``from _helpers import ...``)."""

import numpy as np
from sklearn.datasets import make_blobs

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
