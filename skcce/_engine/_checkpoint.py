"""Checkpoints of CCEClustering.fit: atomic writes and a fingerprint of what they belong to.

A checkpoint is one ``torch.save`` file written at the end of every epoch (and after every
restart) by :func:`save`: into a temporary file in the same directory, flushed and fsynced,
then moved over the old one with :func:`os.replace` (atomic on POSIX and Windows), so an
interruption at any moment leaves either the previous or the new checkpoint, never a torn one.

Contents (a dict): ``format``; ``fingerprint`` (:func:`fingerprint`); ``seeds`` (one per
restart); ``run`` (restart index) and ``epoch`` (epochs completed in it); ``module``,
``optimizer`` (state dicts), ``generator`` (the torch.Generator state after the epoch) and
``history`` of the current restart; ``finished`` (score, module state, history and run of every
finished restart: the kept one is chosen among them all, :mod:`skcce._engine._select`; a
checkpoint of 0.3 holds ``best``, its best finished restart, instead); ``complete`` (the fit
finished: a later fit loads the result).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
import torch

from skcce._engine._callbacks import Callback, EpochEnd, RunResult, cluster_sizes
from skcce._engine._inference import infer_labels_sharded
from skcce._engine._io import atomic_write
from skcce._engine._select import Best

FORMAT = 1


class CheckpointMismatchError(ValueError):
    """The checkpoint file was written by a fit with other settings or other data."""


def fingerprint(settings: dict, X, inputs, world_size: int) -> dict:
    """What a checkpoint must match to be resumed: settings, data summary, world size.

    The data are identified by their shape, dtype and a hash of the fitted normalisation
    (per-feature means and scales, streamed over all of X) and of the first and last rows:
    cheap on data of any size, and different data practically never agree on all of them.
    """
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(inputs.mean).tobytes())
    digest.update(np.ascontiguousarray(inputs.std).tobytes())
    digest.update(np.ascontiguousarray(X[:1]).tobytes())
    digest.update(np.ascontiguousarray(X[-1:]).tobytes())
    data = {"shape": tuple(int(d) for d in X.shape), "dtype": str(X.dtype)}
    data["hash"] = digest.hexdigest()[:16]
    return {"settings": dict(settings), "data": data, "world_size": int(world_size)}


def check(path, saved: dict, current: dict) -> None:
    """Raise :class:`CheckpointMismatchError` naming every difference between fingerprints."""
    problems = []
    for key, now in current["settings"].items():
        then = saved["settings"].get(key, "<missing>")
        if then != now:
            problems.append(f"{key}={then!r} in the checkpoint, {now!r} now")
    for key in sorted(set(saved["settings"]) - set(current["settings"])):
        problems.append(f"{key}={saved['settings'][key]!r} in the checkpoint, absent now")
    for key in ("shape", "dtype", "hash"):
        if saved["data"][key] != current["data"][key]:
            name = {"hash": "data content"}.get(key, f"X {key}")
            problems.append(
                f"{name}: {saved['data'][key]} in the checkpoint, {current['data'][key]} now"
            )
    if saved["world_size"] != current["world_size"]:
        problems.append(
            f"world size {saved['world_size']} in the checkpoint, {current['world_size']} now"
        )
    if problems:
        raise CheckpointMismatchError(
            f"checkpoint {os.fspath(path)!r} belongs to another fit: "
            + "; ".join(problems)
            + ". Delete the file or pass another checkpoint path to start afresh."
        )


def load(path) -> dict | None:
    """The checkpoint at ``path`` (tensors on the CPU), or None when there is no file."""
    if not os.path.exists(path):
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a foreign or damaged file: say which
        raise CheckpointMismatchError(
            f"checkpoint {os.fspath(path)!r} could not be read as an skcce checkpoint: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointMismatchError(
            f"checkpoint {os.fspath(path)!r} is not an skcce checkpoint (format {FORMAT})"
        )
    return state


def save(path, state: dict) -> None:
    """Write ``state`` to ``path`` atomically (:func:`skcce._engine._io.atomic_write`)."""
    atomic_write(path, lambda fh: torch.save({**state, "format": FORMAT}, fh), binary=True)


def cpu_state(module: torch.nn.Module) -> dict:
    """A CPU copy of a module's state dict (detached from training)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}


def describe(value):
    """A comparable, picklable description of a parameter value for :func:`fingerprint`."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list | tuple | np.ndarray):
        arr = np.asarray(value)
        return arr.tolist() if arr.dtype.kind in "biuf" else repr(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, torch.nn.Module):
        return f"module {type(value).__module__}.{type(value).__qualname__}"
    if callable(value):
        name = getattr(value, "__qualname__", type(value).__qualname__)
        return f"callable {getattr(value, '__module__', '?')}.{name}"
    return f"{type(value).__module__}.{type(value).__qualname__}"


class Resume:
    """A fit's checkpoint read back: the one place where its state is restored.

    Parameters
    ----------
    state : dict
        The checkpoint (see the module docstring).
    """

    def __init__(self, state: dict):
        self.state = state
        self.seeds = state["seeds"]
        self.first_run = int(state["run"])

    def restore(self, run, module, generator):
        """Put restart ``run`` back where the checkpoint left it.

        Loads the weights into ``module`` and the state of ``generator`` when the checkpoint
        stopped inside this restart; returns ``(first epoch, history, optimizer state or
        None, estimated prior masses or None, the last epoch's training labels or None)``
        (``(0, [], None, None, None)`` for a restart that starts afresh).
        """
        state = self.state
        if run != self.first_run or state["epoch"] <= 0:
            return 0, [], None, None, None
        module.load_state_dict(state["module"])
        generator.set_state(state["generator"])
        history = list(state["history"])
        return (int(state["epoch"]), history, state.get("optimizer"), state.get("prior_mass"),
                state.get("labels"))  # fmt: skip

    def finished_records(self) -> list:
        """``(score, weights, history, run)`` of every finished restart in the checkpoint."""
        if "finished" in self.state:
            return list(self.state["finished"])
        best = self.state.get("best")  # a checkpoint written before the consensus choice
        return [] if best is None else [best]

    def finished(self, build, X, inputs, device, ctx, n_clusters) -> list[Best]:
        """The checkpoint's finished restarts, rebuilt: the network on ``device`` and its
        training labels and cluster sizes (one streaming pass, no (N, K) array); the score
        is the one the checkpoint stored."""
        out = []
        for score, weights, history, run, *prior in self.finished_records():
            module = build(torch.Generator().manual_seed(int(self.seeds[run])))
            module.load_state_dict(weights)
            module.to(device)
            labels, _ = infer_labels_sharded(module, X, inputs, device, ctx, n_clusters)
            prior = prior[0] if prior else None
            sizes = cluster_sizes(labels, n_clusters)
            out.append(Best(score, module, history, labels, run, prior, sizes))
        return out


def open_checkpoint(path, settings, X, inputs, ctx, device, seeds):
    """``(Checkpoint callback, Resume or None)`` for the fit that writes ``path``.

    Rank 0 reads the file and checks that it belongs to this fit (``settings``, the data,
    the world size); its verdict is broadcast, so only rank 0 needs to see the file.

    Raises
    ------
    CheckpointMismatchError
        The file belongs to another fit, or is not an skcce checkpoint.
    """
    mark = fingerprint(settings, X, inputs, ctx.world_size)
    state = error = None
    if ctx.is_main:
        try:
            state = load(path)
            if state is not None:
                check(path, state["fingerprint"], mark)
        except CheckpointMismatchError as exc:
            state, error = None, exc
    state, error = ctx.broadcast((state, error), device)
    if error is not None:
        raise error
    resume = None if state is None else Resume(state)
    seeds = seeds if resume is None else resume.seeds
    return Checkpoint(path, mark, seeds, ctx.is_main, resume), resume


class Checkpoint(Callback):
    """Writes a fit's checkpoint after every epoch and every restart (only where ``write``).

    Parameters
    ----------
    path : str or path-like
        The checkpoint file.
    fingerprint : dict
        :func:`fingerprint` of this fit.
    seeds : ndarray
        One seed per restart.
    write : bool
        False on the ranks other than 0 (they keep identical states and write nothing).
    resume : Resume, optional
        The checkpoint this fit resumes (its finished restarts are carried on).
    """

    def __init__(self, path, fingerprint, seeds, write=True, resume=None):
        self.path = path
        self.fingerprint = fingerprint
        self.seeds = np.asarray(seeds)
        self.write = write
        self._finished = [] if resume is None else resume.finished_records()

    def _save(self, **fields):
        if self.write:
            save(self.path, {"fingerprint": self.fingerprint, "seeds": self.seeds, **fields})

    def on_epoch_end(self, state: EpochEnd):
        if not self.write:
            return
        self._save(
            run=state.run,
            finished=self._finished,
            complete=False,
            epoch=state.epoch,
            history=state.history,
            module=state.module,
            optimizer=state.optimizer.state_dict(),
            generator=state.generator.get_state(),
            prior_mass=state.prior_mass,
            labels=state.labels,
        )

    def on_run_end(self, result: RunResult, finished: list):
        """After a finished restart the next one starts from scratch (or the fit is done);
        an interrupted restart leaves its last epoch's checkpoint in place."""
        if result.interrupted:
            return
        known = {record[3] for record in self._finished}
        for record in finished:  # copy the weights of each finished restart once
            if record.run not in known:
                weights = cpu_state(record.module)
                self._finished.append(
                    (record.score, weights, list(record.history), record.run, record.prior)
                )
        next_run = result.run + 1
        self._save(
            run=next_run,
            epoch=0,
            history=[],
            module=None,
            optimizer=None,
            generator=None,
            finished=self._finished,
            complete=next_run == len(self.seeds),
        )
