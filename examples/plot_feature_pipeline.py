"""
Clustering images with frozen timm features: the design card's Pipeline
========================================================================

``Pipeline([FeatureExtractor(), CCEClustering()])`` turns images into frozen backbone
features and clusters them with collision cross-entropy self-labeling — the setting of the
paper's Table 1 (frozen ResNet-50 features, linear head).

ImageNet weights are downloaded by timm from the Hugging Face hub. This example uses them when
``SKCCE_PRETRAINED=1`` is set (and the weights are reachable or cached); otherwise, e.g. on an
offline machine, it uses **random weights**, which only demonstrates the API: random features
cluster little better than raw pixels.
"""

# %%
# Data: scikit-learn's digits as small grey images (N, H, W), uint8.
import os

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import normalized_mutual_info_score
from sklearn.pipeline import Pipeline

from skcce import CCEClustering, FeatureExtractor
from skcce.metrics import clustering_accuracy

torch.set_num_threads(1)  # small inputs; the docs build runs on few shared cores

digits = load_digits()
images = (digits.images * (255 / 16)).astype(np.uint8)[:400]
y = digits.target[:400]
print(images.shape, images.dtype)

# %%
# The pipeline. Grey images are replicated to three channels and resized by the extractor
# (to the model's own input size with ImageNet weights; to 64x64 with random weights, where
# smaller inputs give nearly collinear pooled features that cluster even worse).
pretrained = os.environ.get("SKCCE_PRETRAINED") == "1"
pipe = Pipeline(
    [
        (
            "features",
            FeatureExtractor(
                "resnet50" if pretrained else "resnet18",
                pretrained=pretrained,
                image_size=None if pretrained else 64,
                batch_size=100,
            ),
        ),
        ("cce", CCEClustering(n_clusters=10, n_init=3, random_state=0)),
    ]
)
labels = pipe.fit_predict(images)
print("weights:", "ImageNet" if pretrained else "random (offline demo)")
print("feature dimension:", pipe["features"].n_features_out_)
acc = clustering_accuracy(y, labels)
print(f"accuracy {acc:.3f}, NMI {normalized_mutual_info_score(y, labels):.3f}")

# %%
# The fitted clusterer is an ordinary scikit-learn estimator: soft assignments and the
# label-free score used by ``GridSearchCV`` to pick λ.
proba = pipe.predict_proba(images[:5])
print(np.round(proba, 2))
print("label-free score (mutual information, nats):", round(pipe.score(images), 3))
