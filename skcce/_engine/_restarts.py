"""The restarts of a fit: trained together or one by one, and what became of them.

:func:`run_restarts` is the engine's one entry for a fit's restarts, in the manner of
scikit-learn's KMeans, whose estimator validates, runs ``_kmeans_single`` per restart and
keeps the best: here the estimator validates and plans, this module runs every restart and
returns what each became (:class:`Restarts`), and the estimator chooses the kept restart
(:mod:`skcce._engine._select`) and sets the fitted attributes.

The linear head's restarts train together (:mod:`skcce._engine._batched`) when
:func:`skcce._engine._batched.applies`; every other fit, and a batched fit whose restarts
diverge (``FloatingPointError``), trains them one by one
(:func:`skcce._engine._train.run_single`), where a diverged restart is skipped when
:func:`skips_diverged` allows it. Every callback hears each restart begin once, and each epoch
of it begin and end once, whichever path trained it (:class:`_Once`): after a fallback the
restarts' first epochs are trained again, unheard.
"""

from __future__ import annotations

from dataclasses import dataclass

from skcce._engine import _batched
from skcce._engine._callbacks import Callback, RunResult
from skcce._engine._select import Best
from skcce._engine._train import run_single


@dataclass(frozen=True)
class Restarts:
    """What the restarts of a fit became.

    ``finished`` lists every restart that completed an epoch (those of a resumed checkpoint
    first), in run order; ``last`` is the last restart run (None: nothing was left to run),
    ``interrupted`` when Ctrl-C ended the fit; ``diverged`` names the restarts skipped because
    their outputs became non-finite.
    """

    finished: list[Best]
    last: RunResult | None
    diverged: tuple[int, ...] = ()

    @property
    def interrupted(self) -> bool:
        """Ctrl-C ended the fit (at the end of the last restart's last completed epoch)."""
        return self.last is not None and self.last.interrupted


def skips_diverged(run, n_init, ctx, checkpoint, completed) -> bool:
    """Whether restart ``run``, diverged when trained alone, is skipped (the other restarts
    decide) rather than raised.

    Only a fit of several restarts on one process without a checkpoint skips one (a single
    restart has no other, the ranks of a data-parallel fit must agree, and a checkpoint
    resumes exactly the restarts it wrote), and never the last restart when no restart has
    ``completed`` an epoch: a fit does not end without one.

    Examples
    --------
    >>> from skcce._engine._distributed import Context
    >>> skips_diverged(0, 3, Context(), False, completed=False)
    True
    >>> skips_diverged(2, 3, Context(), False, completed=False)  # the last, nothing kept
    False
    >>> skips_diverged(0, 1, Context(), False, completed=False)  # no other restart
    False
    """
    several_alone = n_init > 1 and not ctx.active and not checkpoint
    return several_alone and (run + 1 < n_init or completed)


class _Once(Callback):
    """The fit's callbacks, told of each restart's beginning and of each of its epochs once
    (a batched fit that falls back to one by one trains its first epochs again)."""

    def __init__(self, callbacks):
        self.callbacks = list(callbacks)
        self.runs, self.epochs = set(), set()  # told: runs begun; (run, epoch) begun
        self.quiet = False  # the epoch under way was told already

    def on_run_begin(self, run, first_epoch):
        if run not in self.runs:
            self.runs.add(run)
            for callback in self.callbacks:
                callback.on_run_begin(run, first_epoch)

    def on_epoch_begin(self, run, epoch):
        self.quiet = (run, epoch) in self.epochs
        if not self.quiet:
            self.epochs.add((run, epoch))
            for callback in self.callbacks:
                callback.on_epoch_begin(run, epoch)

    def on_batch_end(self, run):
        if not self.quiet:
            for callback in self.callbacks:
                callback.on_batch_end(run)

    def on_epoch_end(self, state):
        if not self.quiet:
            for callback in self.callbacks:
                callback.on_epoch_end(state)

    def on_run_end(self, result, finished):
        for callback in self.callbacks:
            callback.on_run_end(result, finished)


@dataclass(frozen=True)
class _Training:
    """What every restart of a fit shares, and the two ways of training them."""

    X: object
    prepared: object
    cfg: object
    build: object
    seeds: object
    ctx: object
    told: _Once  # the fit's callbacks

    def together(self, runs) -> list | None:
        """``(run, RunResult)`` of the restarts ``runs`` trained as one batched model, or
        None when one of them diverged (they are then trained one by one)."""
        try:
            results = _batched.run_batched(
                self.X, self.prepared, self.cfg, self.build, self.seeds, runs,
                callbacks=(self.told,),
            )  # fmt: skip
        except FloatingPointError:
            return None
        return [(result.run, result) for result in results]

    def one_by_one(self, runs, resume, checkpoint, completed):
        """``(run, RunResult)`` of each restart in ``runs`` trained alone, in order;
        ``(run, None)`` for a diverged restart that :func:`skips_diverged` skips
        (``completed``: a restart before ``runs`` completed an epoch)."""
        for run in runs:
            try:
                result = run_single(
                    self.X, self.prepared, self.cfg, self.build, self.seeds[run], run,
                    ctx=self.ctx, callbacks=(self.told,), resume=resume,
                )  # fmt: skip
            except FloatingPointError:
                if not skips_diverged(run, len(self.seeds), self.ctx, checkpoint, completed):
                    raise
                yield run, None
                continue
            completed = completed or bool(result.history)
            yield run, result


def run_restarts(
    X, prepared, cfg, build, seeds, *, ctx, linear, checkpoint, callbacks=(), resume=None
) -> Restarts:
    """Train the restarts of a fit (those still to run, when ``resume`` continues one).

    Parameters
    ----------
    X : ndarray
        The user's array (validated).
    prepared : skcce._engine._preprocess.Prepared
        Its layout and fitted normalisation.
    cfg : skcce._engine._train.TrainConfig
    build : callable
        The network of a restart (:func:`skcce._engine._build.make_builder`).
    seeds : ndarray
        One seed per restart (a resumed fit runs its checkpoint's seeds instead).
    ctx : skcce._engine._distributed.Context
        Data-parallel context.
    linear : bool
        The model is the built-in linear head (its restarts may train together).
    checkpoint : bool
        The fit writes a checkpoint (its restarts train one by one, and none is skipped).
    callbacks : sequence of Callback
    resume : skcce._engine._checkpoint.Resume, optional
        The checkpoint this fit continues: its finished restarts, then the rest.

    Returns
    -------
    Restarts

    Raises
    ------
    FloatingPointError
        A restart diverged and :func:`skips_diverged` does not skip it.
    """
    finished, first = [], 0
    if resume is not None:
        seeds, first = resume.seeds, resume.first_run
        finished = resume.finished(build, X, prepared.inputs, cfg.device, ctx, cfg.n_clusters)
    runs = range(first, len(seeds))
    training = _Training(X, prepared, cfg, build, seeds, ctx, _Once(callbacks))
    results = None
    if _batched.applies(linear, len(runs), cfg, ctx, checkpoint):
        results = training.together(runs)
    if results is None:
        results = training.one_by_one(runs, resume, checkpoint, completed=bool(finished))
    diverged, last = [], None
    for run, result in results:
        if result is None:
            diverged.append(run)  # the other restarts decide
            continue
        last, record = result, Best.of(result)
        if record is not None:
            finished.append(record)
        training.told.on_run_end(result, finished)
        if result.interrupted:
            break
    return Restarts(finished, last, tuple(diverged))
