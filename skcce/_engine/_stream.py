"""The state of a stream of ``CCEClustering.partial_fit`` calls (the linear head only).

A stream trains one model, chunk by chunk: every call updates the input normalisation with
the chunk (:class:`Moments`), re-expresses the linear head in the new normalisation so that
its predictions do not change (:func:`carry_head_`), and runs one pass of the self-labeling
loop over the chunk's shuffled mini-batches (:func:`skcce._engine._train.run_epoch`, the
train step ``fit`` uses). :class:`Stream` holds what must survive between calls and pickles
with the estimator: the settings, the normalisation accumulators, the optimiser's state, the
shuffling generator's state, the prior tracker and the step count. The network itself is the
estimator's ``module_`` (pickled once, by the estimator).

:meth:`Stream.advance` never changes the stream it is called on nor the module it is given:
it returns a new stream and a new module (:class:`Pass`), which the estimator sets only once
the call has succeeded, so that an error leaves the model as it was.
"""

from __future__ import annotations

import copy
import hashlib
import io
from dataclasses import dataclass, replace

import numpy as np
import torch

from skcce._engine._device import loadable_device
from skcce._engine._distributed import Context
from skcce._engine._inference import infer_labels
from skcce._engine._preprocess import Inputs, _power_of_two, merge_moments
from skcce._engine._prior import PriorTracker
from skcce._engine._relocate import relocate_epoch_
from skcce._engine._step import Step
from skcce._engine._threads import wide
from skcce._engine._train import make_optimizer, run_epoch
from skcce.models import build_model
from skcce.models._defaults import ROWS_PER_CLUSTER
from skcce.models._kmeans_init import (
    MAX_SAMPLES,
    SCALE_SAMPLES,
    head_from_centroids_,
    inertia,
    initial_centroids,
    lloyd_work,
    soft_assignment_scale,
    subsample_size,
)

#: Values (rows x features) of one block of the statistics' float64 temporaries.
BLOCK_VALUES = 1 << 20
#: KMeans runs (k-means++ seeds and Lloyd) on the first chunk for a k-means head; the one of
#: lowest inertia starts the stream, as ``KMeans(n_init=10)`` keeps its best run (a single
#: run merged two of ten well separated blobs on some seeds, which the stream never undid) ...
INIT_RUNS = 10
#: ... fewer when one run's Lloyd iteration would pass this many multiply-adds (subsample
#: rows x clusters x features): at least one.
INIT_BUDGET = 5e8


def batch_rows(n_rows: int, batch_size: int, n_clusters: int) -> int:
    """The batch size one pass over a chunk of ``n_rows`` rows is cut with.

    The chunk is cut into batches of ``batch_size`` rows, unless the last would hold fewer
    than :data:`~skcce.models._defaults.ROWS_PER_CLUSTER` rows per cluster (the floor of
    ``batch_size="auto"``: below it the batch's fairness term cannot fill every cluster, and
    the exact pseudo-label solve is at its slowest); then the chunk is cut into one batch
    fewer, of equal sizes (within a row), each at least ``batch_size`` rows.

    Examples
    --------
    >>> batch_rows(1000, 400, 100)  # 400 + 400 + 200: the 200 are shared, 500 + 500
    500
    >>> batch_rows(1000, 250, 10), batch_rows(170, 50, 4)  # 20 rows hold 4 per cluster
    (250, 50)
    >>> batch_rows(300, 400, 100)  # one batch, whatever its size
    400
    """
    n_batches, last = -(-n_rows // batch_size), n_rows % batch_size
    if n_batches < 2 or last == 0 or last >= ROWS_PER_CLUSTER * n_clusters:
        return int(batch_size)
    return -(-n_rows // (n_batches - 1))


def start_rows(n_clusters: int) -> int:
    """Rows a stream's KMeans start is built from (when the chunks hold them): as many as
    ``fit``'s start reads, ``max(5000, 256 * n_clusters)``
    (:func:`skcce.models._kmeans_init.subsample_size`)."""
    return subsample_size(np.iinfo(np.int64).max, n_clusters)


@dataclass
class Start:
    """The running KMeans start of a stream: the mean of the rows assigned to each cluster
    so far and their number, in the stream's current normalised space.

    Until the stream has seen :func:`start_rows` rows, every call assigns its chunk's rows to
    the nearest mean, merges them in (each mean becomes the mean of every row assigned to it
    so far: a mini-batch k-means step, as ``MiniBatchKMeans.partial_fit`` makes) and sets the
    head to the soft assignment of the means before its pass, so that the start sees as many
    rows as ``fit``'s does, not the first chunk's only.
    """

    means: np.ndarray  # (K, d) float64
    counts: np.ndarray  # (K,) float64

    def carried(self, old: Inputs, new: Inputs) -> Start:
        """The same means in ``new``'s normalised space (``old``'s before; the same
        whitening map): ``u_new = (a_n / a_o) (u_old - c_o) + c_n`` (:func:`_affine`)."""
        a_old, c_old = _affine(old)
        a_new, c_new = _affine(new)
        means = (a_new / a_old) * (self.means - c_old) + c_new
        return Start(means, self.counts.copy())

    def merged(self, X, inputs: Inputs, assign) -> Start:
        """These means and the rows of ``X`` (normalised by ``inputs``), each assigned to
        the cluster ``assign(rows)`` says (rows read in blocks whose features and scores
        each hold at most :data:`BLOCK_VALUES` values). A cluster that has no row yet takes
        the row ``assign`` scores highest for it (its count stays 0, so that its first rows
        replace it)."""
        k, d = self.means.shape
        sums, counts = np.zeros((k, d)), np.zeros(k)
        best, best_row = np.full(k, -np.inf), self.means.copy()
        step = max(1, BLOCK_VALUES // max(1, d, k))  # the (rows, K) scores are bounded too
        cpu = torch.device("cpu")
        for begin in range(0, X.shape[0], step):
            rows = inputs.raw(X, slice(begin, begin + step), cpu).double().numpy()
            scores = assign(rows)  # (b, K): the larger, the nearer
            labels = scores.argmax(axis=1)
            onehot = np.zeros((len(rows), k))
            onehot[np.arange(len(rows)), labels] = 1.0
            sums += onehot.T @ rows
            counts += onehot.sum(axis=0)
            top = scores.argmax(axis=0)
            better = scores[top, np.arange(k)] > best
            best[better] = scores[top, np.arange(k)][better]
            best_row[better] = rows[top[better]]
        total = self.counts + counts
        means = np.where(
            (total > 0)[:, None],
            (self.counts[:, None] * self.means + sums) / np.maximum(total, 1.0)[:, None],
            best_row,
        )
        return Start(means, total)


def nearest(means: np.ndarray):
    """``assign`` of :meth:`Start.merged` for the nearest mean: minus half the squared
    distance, up to a per-row constant."""
    half = 0.5 * (means * means).sum(axis=1)
    return lambda rows: rows @ means.T - half


def head_scores(module: torch.nn.Module):
    """``assign`` of :meth:`Start.merged` by a head's logits (a KMeans head: its centroids)."""

    @torch.no_grad()
    def assign(rows):
        return module(torch.from_numpy(rows).to(module.weight.dtype)).double().numpy()

    return assign


def restart_head_(module: torch.nn.Linear, start: Start, X, inputs: Inputs):
    """Set the head to the soft assignment of the start's means, with the stiffness of the
    KMeans start (:func:`skcce.models._kmeans_init.soft_assignment_scale`) on evenly spaced
    rows of the chunk ``X``."""
    n = X.shape[0]
    idx = np.linspace(0, n - 1, min(n, SCALE_SAMPLES)).astype(np.intp)
    rows = inputs.raw(X, idx, torch.device("cpu")).double().numpy()
    return head_from_centroids_(module, start.means, soft_assignment_scale(rows, start.means))


@dataclass
class Moments:
    """Running statistics of flat features seen so far, merged chunk by chunk.

    Attributes
    ----------
    count : int
        Rows seen.
    mean, m2 : ndarray of shape (n_features,)
        Per-feature mean and sum of squared deviations of ``X / scale`` (float64).
    lo, hi : ndarray of shape (n_features,)
        Per-feature minimum and maximum of X (a feature is constant while they are equal).
    peak : float
        The largest ``|x|`` seen; ``scale`` is its power of two (as in
        :func:`skcce._engine._preprocess.fit_inputs`).
    scale : float
    """

    count: int
    mean: np.ndarray
    m2: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    peak: float = 0.0
    scale: float = 1.0

    @classmethod
    def empty(cls, n_features: int) -> Moments:
        """No rows seen."""
        zeros, big = np.zeros(n_features), np.full(n_features, np.inf)
        return cls(0, zeros, zeros.copy(), big, -big)

    @classmethod
    def of_inputs(cls, inputs: Inputs, count: int) -> Moments:
        """The statistics a fit's normalisation ``inputs`` stands for, on ``count`` rows.

        ``fit`` keeps the per-feature mean and one global standard deviation, not the
        per-feature variances: every feature is given the mean variance (the normalisation
        depends on their mean only), and none is taken as constant.
        """
        d = inputs.mean.shape[0]
        std = float(np.asarray(inputs.std, dtype=np.float64).flat[0])
        m2 = np.full(d, count * std * std)
        big = np.full(d, np.inf)
        mean = np.array(inputs.mean, dtype=np.float64)
        return cls(int(count), mean, m2, -big, big, inputs.scale / 2.0, inputs.scale)

    def merged(self, X) -> Moments:
        """These statistics and those of the rows of ``X`` (a new object; X is read in
        blocks of :data:`BLOCK_VALUES` values, never copied whole).

        The blocks' means and sums of squared deviations are combined by Chan et al.'s
        pairwise update, as :func:`skcce._engine._preprocess.fit_inputs` combines its chunks
        (on a first chunk the result is the same, bit for bit). When the chunk raises the
        largest ``|x|`` past the current power of two, the accumulators are rescaled to the
        new ``scale`` first (by a power of two: exactly).
        """
        n = X.shape[0]
        step = max(1, BLOCK_VALUES // max(1, X.shape[1]))
        lo, hi = np.full(X.shape[1], np.inf), np.full(X.shape[1], -np.inf)  # the chunk's
        for start in range(0, n, step):
            block = X[start : start + step]
            np.minimum(lo, block.min(axis=0), out=lo)
            np.maximum(hi, block.max(axis=0), out=hi)
        peak = max(self.peak, float(np.abs(lo).max()), float(np.abs(hi).max()))
        lo, hi = np.minimum(lo, self.lo), np.maximum(hi, self.hi)
        scale = _power_of_two(peak)
        ratio = self.scale / scale  # a power of two
        count, mean, m2 = self.count, self.mean * ratio, self.m2 * (ratio * ratio)
        for start in range(0, n, step):
            block = np.multiply(X[start : start + step], 1.0 / scale, dtype=np.float64)
            count, mean, m2 = merge_moments(count, mean, m2, block, block.shape[0])
        return Moments(int(count), mean, m2, lo, hi, peak, scale)

    def inputs(self, whiten=None) -> Inputs:
        """The normalisation of these statistics (as ``fit`` makes it: the per-feature mean
        and one global standard deviation, the root of the features' mean variance, constant
        features counting 0), with the whitening map ``whiten``."""
        var = np.where(self.lo == self.hi, 0.0, self.m2 / max(self.count, 1))
        std = np.full_like(self.mean, np.sqrt(var.mean()))
        std = np.where(std > 0, std, 1.0)
        return Inputs("flat", self.mean.copy(), std, self.scale, whiten)


def _affine(inputs: Inputs):
    """``(a, c)`` with ``normalised(x) = a * (x @ A) + c`` for the whitening map ``A`` (the
    identity when None): ``a = 1 / (scale * std)``, ``c = -(mean @ A) / std``."""
    std = float(np.asarray(inputs.std, dtype=np.float64).flat[0])
    mean = np.asarray(inputs.mean, dtype=np.float64)
    if inputs.whiten is not None:
        mean = mean @ np.asarray(inputs.whiten, dtype=np.float64)
    return 1.0 / (inputs.scale * std), -mean / std


@torch.no_grad()
def carry_head_(layer: torch.nn.Linear, old: Inputs, new: Inputs) -> torch.nn.Linear:
    r"""Re-express a linear head trained on ``old``'s normalised rows for ``new``'s.

    With :math:`u = a\,(xA) + c` the normalised row of each (:func:`_affine`; the same
    whitening map ``A`` in both), the logits :math:`W u_{old} + b` equal
    :math:`W' u_{new} + b'` for every ``x`` with :math:`W' = (a_o / a_n) W` and
    :math:`b' = b + W (c_o - (a_o / a_n) c_n)` (computed in float64, rounded to the layer's
    dtype). Changed in place; nothing changes when the two normalisations are equal.
    """
    a_old, c_old = _affine(old)
    a_new, c_new = _affine(new)
    if a_old == a_new and np.array_equal(c_old, c_new):
        return layer
    ratio = a_old / a_new
    W = layer.weight.detach().to("cpu", torch.float64).numpy()
    b = layer.bias.detach().to("cpu", torch.float64).numpy()
    bias = b + W @ (c_old - ratio * c_new)
    layer.weight.copy_(torch.from_numpy(ratio * W).to(layer.weight.dtype))
    layer.bias.copy_(torch.from_numpy(bias).to(layer.bias.dtype))
    return layer


def first_head(generator, X, inputs: Inputs, n_clusters: int, init, seed: int):
    """The linear head that starts a stream, for the first chunk ``X`` and its
    normalisation ``inputs``, and the init used (``"random"``, ``"kmeans"`` or ``"array"``).

    The head is built from ``generator`` as ``fit`` builds a restart's (a random head); for
    ``init="kmeans"`` it is then set to the soft assignment of the best (lowest inertia, on
    the same evenly spaced rows) of :data:`INIT_RUNS` KMeans runs on the chunk
    (:func:`skcce.models._kmeans_init.initial_centroids`, seeded from ``seed``), for an
    array to that of these centroids (in the units of X).
    """
    d = X.shape[1]
    module = build_model("linear", (d,), n_clusters, generator=generator)
    if isinstance(init, str) and init == "random":
        return module, "random"
    cpu = torch.device("cpu")

    def fetch(idx):
        return inputs.raw(X, idx, cpu).numpy()

    n = X.shape[0]
    if not isinstance(init, str):  # the user's centroids, normalised
        centroids = inputs.raw(np.asarray(init), slice(None), cpu).double().numpy()
        head_from_centroids_(module, *initial_centroids(fetch, n, n_clusters, centroids, seed))
        return module, "array"
    m = subsample_size(n, n_clusters)
    runs = int(np.clip(INIT_BUDGET // (m * n_clusters * d), 1, INIT_RUNS))
    rows = fetch(np.linspace(0, n - 1, min(n, MAX_SAMPLES)).astype(np.intp))
    best, best_inertia = None, np.inf
    for run_seed in np.random.default_rng(seed).integers(2**31 - 1, size=runs):
        with wide(lloyd_work(n, n_clusters, d)):  # scikit-learn's KMeans: the caller's threads
            result = initial_centroids(fetch, n, n_clusters, "kmeans", int(run_seed))
        value = inertia(rows, result[0])
        if value < best_inertia:  # ties: the first
            best, best_inertia = result, value
    head_from_centroids_(module, *best)
    return module, "kmeans"


def fingerprint(module: torch.nn.Module) -> str:
    """A digest of the module's parameters and buffers (to tell whether the estimator's
    ``module_`` is still the one the stream trained last)."""
    digest = hashlib.sha256()
    for name, value in module.state_dict().items():
        digest.update(name.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@dataclass
class Pass:
    """What one ``partial_fit`` call made: the new stream, the trained module, the chunk's
    normalisation, its clusters and their label-free score (no (N, K) array is kept), the
    pass's history entry and, on a first call, the head's start ("random", "kmeans" or
    "array")."""

    stream: Stream
    module: torch.nn.Module
    inputs: Inputs
    labels: np.ndarray
    score: float
    history: dict
    init: str | None = None


class Stream:
    """What a stream of ``partial_fit`` calls carries from one call to the next.

    Parameters
    ----------
    cfg : skcce._engine._train.TrainConfig
        The settings, resolved on the first call (its ``max_epochs`` is unused).
    moments : Moments
        The normalisation's accumulators.
    seed : int
        Seeds the generator that builds the head and shuffles every chunk.
    whiten : ndarray or None
        The whitening map (estimated on the first chunk, then fixed).
    n_steps : int, default=0
        Optimiser steps so far (a fit's, when the stream continues one).
    n_passes : int, default=0
        Passes so far (a fit's epochs, when the stream continues one).
    """

    def __init__(self, cfg, moments, seed, whiten=None, n_steps=0, n_passes=0):
        self.cfg = cfg
        self.moments = moments
        self.whiten = whiten
        self.generator_state = torch.Generator().manual_seed(int(seed)).get_state()
        self.optimizer_state = None  # the optimiser's state_dict after the last pass
        self.tracker = PriorTracker(cfg.prior_kind, cfg.n_clusters, [0], cfg.prior, 1)
        self.n_steps, self.n_passes = int(n_steps), int(n_passes)
        self.fingerprint = None  # of the module after the last pass
        self.start = None  # the running KMeans start (a Start) while it is being built
        self.sizes = None  # rows predicted per cluster in the last pass (None: none yet)
        self.seed = int(seed)  # draws the subsamples that lost clusters are re-seeded on

    # ----- persistence: device tensors travel as torch.save bytes, loaded where they can --
    def __getstate__(self):
        state = self.__dict__.copy()
        state["cfg"] = replace(self.cfg, device=str(self.cfg.device))
        if self.optimizer_state is not None:
            buffer = io.BytesIO()
            torch.save(self.optimizer_state, buffer)
            state["optimizer_state"] = buffer.getvalue()
        return state

    def __setstate__(self, state):
        device = loadable_device(str(state["cfg"].device))
        state["cfg"] = replace(state["cfg"], device=device)
        if isinstance(state.get("optimizer_state"), bytes):
            state["optimizer_state"] = torch.load(
                io.BytesIO(state["optimizer_state"]), map_location=device, weights_only=False
            )
        state.setdefault("start", None)  # a stream pickled before the running start
        state.setdefault("sizes", None)  # ... or before lost clusters were re-seeded
        state.setdefault("seed", 0)
        self.__dict__.update(state)

    def inputs(self) -> Inputs:
        """The normalisation of the rows seen so far."""
        return self.moments.inputs(self.whiten)

    def matches(self, module) -> bool:
        """Whether ``module`` is the module this stream trained last."""
        return self.fingerprint is not None and fingerprint(module) == self.fingerprint

    def advance(self, X, module=None, make_head=None, whitening=None) -> Pass:
        """One ``partial_fit`` call on the chunk ``X`` (validated, flat features).

        Parameters
        ----------
        X : ndarray of shape (n_rows, n_features)
        module : torch.nn.Linear, optional
            The head so far (not changed: a copy is trained); None on the first call.
        make_head : callable, optional
            First call: ``make_head(generator, X, inputs) -> (nn.Linear, init used)``, the
            initial head for the chunk's normalisation ``inputs`` (:func:`first_head`).
        whitening : callable, optional
            First call with ``whiten``: ``whitening(X, inputs) -> ndarray``, the map.

        Returns
        -------
        Pass
            ``self`` is not changed.

        Raises
        ------
        FloatingPointError
            The training diverged (the network's outputs or loss became non-finite).
        """
        new = copy.deepcopy(self)
        new.moments = self.moments.merged(X)
        generator = torch.Generator()
        generator.set_state(new.generator_state)
        k = new.cfg.n_clusters
        sizes = self.sizes  # None: the head is a start, its partition of the chunk is read
        if module is None:
            if whitening is not None:
                new.whiten = whitening(X, new.moments.inputs())
            inputs = new.inputs()
            module, init_used = make_head(generator, X, inputs)
            if init_used == "kmeans" and X.shape[0] < start_rows(k):  # the start goes on
                empty = Start(np.zeros((k, X.shape[1])), np.zeros(k))
                new.start = empty.merged(X, inputs, head_scores(module))
        else:
            init_used = None
            inputs = new.inputs()
            module = carry_head_(copy.deepcopy(module), self.inputs(), inputs)
            if new.start is not None:
                start = new.start.carried(self.inputs(), inputs)
                start = start.merged(X, inputs, nearest(start.means))
                restart_head_(module, start, X, inputs)
                new.start = start if new.moments.count < start_rows(k) else None
                sizes = None
        # the clusters the last pass (or the start) lost take half of others' rows
        batch = batch_rows(X.shape[0], new.cfg.batch_size, k)
        donors = relocate_epoch_(module.weight, module.bias, sizes, self.tracker.value[0], batch,
                                 X, inputs, new.cfg.device, self.seed, self.n_passes)  # fmt: skip
        entry = new._train(module, X, inputs, generator)
        entry["relocated"] = len(donors)
        new.sizes = entry["cluster_sizes"]
        labels, score = infer_labels(module, X, inputs, new.cfg.device)
        new.fingerprint = fingerprint(module)
        return Pass(new, module, inputs, labels, score, entry, init_used)

    def _train(self, module, X, inputs, generator) -> dict:
        """One pass of the train step over ``X`` (this stream is the call's copy)."""
        cfg = self.cfg
        module.to(cfg.device)
        optimizer = make_optimizer(module, cfg)
        if self.optimizer_state is not None:
            optimizer.load_state_dict(self.optimizer_state)
        # the estimated prior's memory: every row seen, as a fit's is every row of its epoch
        self.tracker.n = max(self.moments.count, 1)
        batch = batch_rows(X.shape[0], cfg.batch_size, cfg.n_clusters)  # the chunk's cut
        step = Step(module, module, optimizer, inputs, replace(cfg, batch_size=batch), Context())
        step.set_tracker(self.tracker)
        entry = run_epoch(step, X, generator, 0, self.n_passes, ())
        if not np.isfinite(entry["loss"]):
            raise FloatingPointError(
                "the training loss became non-finite; lower learning_rate or check the scale of X"
            )
        self.optimizer_state = optimizer.state_dict()
        self.generator_state = generator.get_state()
        self.n_steps += -(-X.shape[0] // batch)
        self.n_passes += 1
        return entry

    def prior(self) -> np.ndarray | None:
        """The prior in force (None: uniform)."""
        return self.tracker.prior_of(0, self.tracker.mass[0])
