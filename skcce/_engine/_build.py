"""The network of one restart: built from the model, its linear head started as ``init`` says."""

from __future__ import annotations

import copy

import torch

from skcce._engine._threads import wide
from skcce.models import build_model
from skcce.models._defaults import restart_init
from skcce.models._kmeans_init import head_from_centroids_, initial_centroids, lloyd_work


def make_builder(model, n_clusters, X, prepared, ctx, device, init):
    """``build(generator, run=None, seed=None) -> nn.Module``: a fresh network per restart.

    For a restart ``run`` the linear head starts as ``init`` says
    (:func:`skcce.models._defaults.restart_init`: random, or the soft assignment of KMeans
    centroids drawn with the restart's ``seed``); ``build.inits[run]`` records the start it
    got ("random", "kmeans" or "array"). Without ``run`` (a checkpoint's restored restart)
    the network is only built.

    Parameters
    ----------
    model : str, torch.nn.Module or callable
        The estimator's ``model`` (a module is deep-copied: the user's object is never
        trained in place).
    n_clusters : int
    X : ndarray
        The training data (the KMeans init draws its subsample from it).
    prepared : skcce._engine._preprocess.Prepared
        Its layout and fitted normalisation.
    ctx : skcce._engine._distributed.Context
        Every rank starts from rank 0's head.
    device : torch.device
    init : str or ndarray
        "random", "kmeans", "auto-kmeans" (``init="auto"`` on the linear head) or validated
        centroids in the units of X.
    Returns
    -------
    build : callable
    """
    inits, state = {}, {"init": init}

    def build(generator, run=None, seed=None):
        net = copy.deepcopy(model) if isinstance(model, torch.nn.Module) else model
        module = build_model(net, prepared.input_shape, n_clusters, generator=generator)
        if run is None:
            return module
        used = restart_init(state["init"], run)
        if used != "random":
            used = init_head(module, X, prepared.inputs, state["init"], seed, ctx, device)
            if used == "random":  # "auto" on too few distinct rows: random heads from now on
                state["init"] = "random"
        inits[run] = used
        return module

    build.inits = inits
    return build


def _auto(init) -> bool:
    return isinstance(init, str) and init == "auto-kmeans"


def init_head(module, X, inputs, init, seed, ctx, device):
    """Set the linear head to the soft KMeans assignment of the restart's centroids (its own
    KMeans run, drawn with ``seed``, or the user's centroids).

    Returns the init used: "kmeans", "array" (the user's centroids) or "random" (``"auto"``
    fell back: the data hold fewer distinct rows than clusters).
    """
    cpu = torch.device("cpu")
    explicit = not _auto(init)
    if isinstance(init, str):
        init = "kmeans"
    else:  # user centroids, in the normalised input space
        init = inputs.raw(init, slice(None), cpu).double().numpy()

    def fetch(idx):
        return inputs.raw(X, idx, cpu).numpy()

    k = module.out_features  # the linear head: one output per cluster
    # scikit-learn's KMeans shares the caller's threads on large work (given centroids: none)
    work = lloyd_work(X.shape[0], k, module.in_features) if isinstance(init, str) else 0
    with wide(work):
        result = initial_centroids(fetch, X.shape[0], k, init, seed, explicit=explicit)
    result = ctx.broadcast(result, device)  # every rank starts from rank 0's head
    if result is None:
        return "random"
    head_from_centroids_(module, *result)
    return "kmeans" if isinstance(init, str) else "array"
