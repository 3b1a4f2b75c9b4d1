"""What a fit that ends with empty or near-empty clusters tells the user to change.

The advice is computed from the settings the fit resolved (``"auto"`` values replaced, the
kept restart's ``init``), so it never suggests what the fit already used, and it names the
restarts that ended the same way.
"""

from __future__ import annotations

import numpy as np


def _advice(linear: bool, used: dict) -> list[str]:
    """The changes worth trying, given the resolved settings ``used``."""
    tips = [
        f"a larger fairness_weight (this fit: {used['fairness_weight']:g}) or lam "
        f"(this fit: {used['lam']:g})"
    ]
    if used["prior"] == "auto":
        tips.append("prior=None (uniform cluster sizes), if the classes are balanced")
    tips.append(f"a smaller learning_rate (this fit: {used['learning_rate']:g})")
    if linear:
        if used["init"] != "kmeans":
            tips.append("init='kmeans'")
        tips.append(f"more restarts (this fit: n_init={used['n_init']})")
    else:
        if used["optimizer"] != "adam":
            tips.append("optimizer='adam'")
        if used["augment"] is None:
            tips.append("augment='default'")
        tips.append(f"a larger batch_size (this fit: {used['batch_size']})")
    tips.append(f"fewer clusters (this fit: n_clusters={used['n_clusters']})")
    return tips


def collapse_message(empty, near_empty, restarts, linear, used) -> str:
    """The ConvergenceWarning of a fit whose kept restart has empty or near-empty clusters.

    Parameters
    ----------
    empty, near_empty : ndarray of int
        The kept restart's empty and near-empty clusters
        (:func:`skcce._engine._callbacks.small_clusters`).
    restarts : tuple (list of int, int)
        The restarts (1-based) that ended with an empty or near-empty cluster, and the
        number of completed restarts.
    linear : bool
        Whether the model is the linear head.
    used : dict
        The resolved settings: ``fairness_weight``, ``lam``, ``learning_rate``, ``init``
        ("random", "kmeans", "mixed" or "array"), ``n_init``, ``optimizer``, ``augment``,
        ``batch_size``, ``n_clusters``, ``prior`` ("uniform", "auto", "estimate" or
        "match") and ``near_empty`` (the near-empty fraction of ``n_samples / n_clusters``,
        default 0.01).

    Returns
    -------
    message : str
    """
    collapsed, total = restarts
    k, parts = used["n_clusters"], []
    if len(empty):
        verb = "is" if len(empty) == 1 else "are"
        parts.append(f"{len(empty)} of {k} clusters {verb} empty after fit (clusters "
                     f"{np.asarray(empty).tolist()[:10]})")  # fmt: skip
    if len(near_empty):
        verb = "holds" if len(near_empty) == 1 else "hold"
        share = used.get("near_empty", 0.01)
        parts.append(
            f"{len(near_empty)} of {k} clusters {verb} fewer than {share:.0%} of "
            f"n_samples / n_clusters (clusters {np.asarray(near_empty).tolist()[:10]})"
        )
    if total == 1:
        which = "the only restart ended with an empty or near-empty cluster"
    elif len(collapsed) == total:
        which = f"every one of the {total} restarts ended with an empty or near-empty cluster"
    else:
        which = (
            f"restarts {collapsed[:10]} of {total} (1-based) ended with an empty or near-empty "
            "cluster, and no other restart agreed better with the rest"
        )
    return f"{'; '.join(parts)}: {which}. Try {'; '.join(_advice(linear, used))}"
