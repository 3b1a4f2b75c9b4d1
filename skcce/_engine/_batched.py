"""The restarts of the linear head trained together, as one batched model.

Restarts are independent, so training them side by side changes nothing but the cost: the
``R`` linear heads are stacked into one ``(R, K, D)`` weight, every step forwards the ``R``
mini-batches (each restart its own, from its own shuffling generator) in one batched product,
solves the ``R`` pseudo-label problems in one pass on the host, and takes one optimiser step
on the sum of the ``R`` losses. The gradient of that sum with respect to restart ``r``'s
weights is restart ``r``'s own gradient, and SGD and Adam update every weight from its own
gradient alone, so each restart follows the path it follows when trained alone, up to the
rounding of a batched matrix product (tested: ``tests/test_batched.py``). Training is
chaotic, so over a long fit (thousands of steps) a rounding difference can still lead to
another local optimum: a relative change of 1e-7 in the initial weights changes a
Fashion-MNIST fit's labels after one epoch, whichever path trains it.

The logits are class-major, ``(R, K, B)``: the softmax and the losses then reduce over a
dimension whose neighbours are contiguous, which on the CPU is several times faster than over
a last dimension of ``K`` numbers. The heads' gradient is computed in closed form
(:func:`skcce.losses._network_loss_grad`; for the collision loss on the CPU in one compiled
pass, :mod:`skcce._engine._fused`) rather than through autograd's graph, plain SGD is
applied in place, and flat data of at most :data:`TABLE_BYTES` are normalised once: a single
restart (``R = 1``) takes this path for these savings alone.

:func:`applies` says when a fit's restarts take this path (the linear head, one process, no
checkpoint, no augmentation, no progress bar; :func:`skcce._engine._restarts.run_restarts`
decides); every other fit, and a batched fit whose restarts diverge, runs the restarts one
by one (:func:`skcce._engine._train.run_single`), which skips a diverged restart as before.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
import torch
from torch import nn

from skcce._engine._callbacks import EpochEnd, RunResult, cluster_sizes
from skcce._engine._decay import add_share_decay
from skcce._engine._epoch_stop import stop_now
from skcce._engine._inference import infer_labels
from skcce._engine._label_change import LabelChanges
from skcce._engine._preprocess import is_memory_mapped
from skcce._engine._relocate import relocate_epoch_
from skcce._engine._step import _forward, _scale_rows, host_probs, solve_rows
from skcce._engine._train import make_optimizer, make_tracker
from skcce.losses import ROW_VALUES, _kl_term, _network_loss_grad
from skcce.solvers import _compiled, _transfer

#: the largest normalised copy of flat training data a batched fit keeps (bytes, float32)
TABLE_BYTES = 256 << 20


def applies(linear, n_runs, cfg, ctx, checkpoint) -> bool:
    """Whether the restarts of this fit train together (see the module notes): ``linear``,
    the model is the built-in linear head; ``checkpoint``, the fit writes a checkpoint."""
    return (
        linear
        and n_runs >= 1
        and not ctx.active
        and not checkpoint
        and cfg.augment is None
        and cfg.backbone_learning_rate is None
        and not cfg.verbose
    )


class StackedHeads(nn.Module):
    """``R`` linear heads as one module: ``(R, B, D)`` inputs to ``(R, K, B)`` logits.

    The logits come out class-major, so that the softmax and the losses reduce over a
    leading dimension of contiguous memory: on the CPU that is about ten times faster than
    reducing over a last dimension of ``K`` numbers.
    """

    def __init__(self, heads):
        super().__init__()
        self.weight = nn.Parameter(torch.stack([h.weight.detach() for h in heads]).clone())
        self.bias = nn.Parameter(torch.stack([h.bias.detach() for h in heads]).clone())

    def forward(self, x):
        return torch.baddbmm(self.bias.unsqueeze(2), self.weight, x.transpose(1, 2))

    def keep_(self, idx):
        """Keep the heads at positions ``idx`` only, in place."""
        index = torch.as_tensor(idx, dtype=torch.long, device=self.weight.device)
        self.weight = nn.Parameter(self.weight.detach().index_select(0, index))
        self.bias = nn.Parameter(self.bias.detach().index_select(0, index))
        return self

    def state_of(self, r) -> dict:
        """Restart ``r``'s weights as an ``nn.Linear`` state dict (CPU copies)."""
        return {
            "weight": self.weight[r].detach().to("cpu", copy=True),
            "bias": self.bias[r].detach().to("cpu", copy=True),
        }


def _joined_map(pool):
    """A ``map`` over ``pool`` that the calling thread joins: it runs the first item itself
    (instead of waiting idle for the pool) and the pool's threads run the others.

    Every submitted item has finished when the map returns or raises, so no thread still
    writes into the caller's arrays afterwards.

    Parameters
    ----------
    pool : concurrent.futures.Executor

    Returns
    -------
    map_ : callable
        ``map_(fn, items)`` -> list of ``fn(item)`` in the order of ``items``.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(1) as pool:
    ...     _joined_map(pool)(lambda x: x * x, range(4))
    [0, 1, 4, 9]
    """

    def map_(fn, items):
        items = list(items)
        if not items:
            return []
        futures = [pool.submit(fn, item) for item in items[1:]]
        try:
            first = fn(items[0])
        finally:
            wait(futures)
        return [first, *(future.result() for future in futures)]

    return map_


class _Batched:
    """What every step of a batched fit shares (the counterpart of ``_step.Step``)."""

    def __init__(self, heads, inputs, cfg, pool=None, runs=None):
        self.heads, self.inputs, self.cfg, self.pool = heads, inputs, cfg, pool
        runs = range(heads.weight.shape[0]) if runs is None else runs
        self.tracker = make_tracker(cfg, runs)  # the restarts' priors
        self._refresh()
        # the closed-form gradient (skcce.losses._network_loss_grad): not under autocast,
        # nor for KL(ybar || u) with a zero prior entry (infinite; autograd reports it)
        zero_prior = cfg.prior is not None and bool((np.asarray(cfg.prior) <= 0).any())
        self.closed_form = not cfg.amp and not (cfg.fairness == "forward" and zero_prior)
        # in-place SGD needs no optimiser object (building the first one in a process
        # imports torch._dynamo: about 1.4 s of a fresh process's first fit)
        self.in_place = self.closed_form and cfg.optimizer == "sgd"
        self.fused = self._fused() if self.closed_form else None
        self.optimizer = None if self.in_place else make_optimizer(heads, cfg)

    def keep(self, idx) -> bool:
        """Train on only the restarts at positions ``idx`` (the others have stopped):
        whether it could (in-place SGD has no optimiser state to cut; another optimiser
        keeps every restart in the stack)."""
        if not self.in_place:
            return False
        self.heads.keep_(idx)
        self.tracker.keep(idx)
        self._refresh()
        return True

    def _refresh(self):
        """The priors in force, (R, K) (:meth:`PriorTracker.tensors`)."""
        self.prior, self.prior_dev = self.tracker.tensors(self.cfg.device)

    def update_prior(self, results):
        """After a step: each restart's tracker sees its batch's pseudo-labels (the running
        marginal always, the prior when it varies)."""
        self.tracker.see([res.labels for res in results])
        if self.tracker.varies:
            self._refresh()

    def _fused(self):
        """The compiled loss-and-gradient pass (:mod:`skcce._engine._fused`) for the
        collision loss on the CPU, or None (the torch reference then runs)."""
        cfg = self.cfg
        if cfg.device.type != "cpu" or not _compiled.takes(cfg.loss, None):
            return None
        from skcce._engine._fused import collision_step  # numba: imported on first use

        k = cfg.n_clusters
        uniform = np.full(k, 1.0 / k)

        def fused(logits, sigma, labels):
            u = uniform if self.prior is None else self.prior.numpy()  # the priors in force
            return collision_step(
                logits, sigma, labels, u, cfg.fairness, cfg.fairness_weight,
                self.tracker.shrink_guard(labels),
            )  # fmt: skip

        return fused

    def _update(self, grad_w, grad_b):
        """The optimiser's step from the gradients: plain SGD (the linear head's default)
        in place, as ``torch.optim.SGD`` computes it (``p -= lr * (g + weight_decay * p)``),
        without its per-call overhead; any other optimiser through its own ``step``."""
        weight, bias = self.heads.weight, self.heads.bias
        share = self.cfg.decay_by_share
        if share:  # each row's own decay (skcce._engine._decay); the optimiser's is 0
            self.add_decay(grad_w, grad_b)
        if not self.in_place:
            weight.grad, bias.grad = grad_w, grad_b
            self.optimizer.step()
            return
        lr, decay = self.cfg.learning_rate, 0.0 if share else self.cfg.weight_decay
        with torch.no_grad():
            for p, g in ((weight, grad_w), (bias, grad_b)):
                p.add_(g.add_(p, alpha=decay) if decay else g, alpha=-lr)

    def add_decay(self, grad_w, grad_b):
        """Add each head row's decay in proportion to its cluster's share to the gradients
        (:mod:`skcce._engine._decay`), in place."""
        heads, cfg = self.heads, self.cfg
        add_share_decay(heads.weight, heads.bias, grad_w, grad_b, cfg.weight_decay,
                        self.tracker.marginal.value)  # fmt: skip

    def solve_all(self, probs):
        """The R solver results of the problems ``probs[r]`` (on ``pool``'s threads): the
        compiled kernels' stacked entry, and the engine's solve for every problem they do
        not take or certify."""
        cfg = self.cfg
        carry = self.tracker.marginal.carry(probs.shape[1])  # (R, K) or None
        results = _compiled.solve_stack(
            probs, lam=cfg.lam, prior=self.prior, fairness=cfg.fairness, loss=cfg.loss,
            method=cfg.solver, tol=cfg.solver_tol, max_iter=cfg.solver_max_iter,
            map_=map if self.pool is None else _joined_map(self.pool),
            n_chunks=1 if self.pool is None else cfg.solve_threads, carry=carry,
        )  # fmt: skip
        if results is None:
            results = [None] * len(probs)
        priors = [None] * len(probs) if self.prior is None else self.prior
        carries = [None] * len(probs) if carry is None else carry
        return [
            res or solve_rows(p, cfg, u, c)
            for res, p, u, c in zip(results, probs, priors, carries, strict=True)
        ]

    def step(self, raw, rows):
        """One step of every restart on the batch ``raw`` of ``rows`` (R, b): restart r's
        sorted batch in row r of ``rows``, its data in rows ``r*b .. (r+1)*b`` of ``raw``.

        Returns the per-restart loss and fairness (R,), the logits (R, K, b) and the R
        solver results."""
        cfg = self.cfg
        n_runs, b = rows.shape
        xb = self.inputs.normalize(raw).view(n_runs, b, -1)
        with torch.set_grad_enabled(not self.closed_form):
            logits = _forward(self.heads, xb, cfg.amp)  # (R, K, b)
            sigma = torch.softmax(logits, dim=1)
        probs = sigma.detach().transpose(1, 2).to(torch.float64).contiguous()  # (R, b, K)
        probs = host_probs(probs / probs.sum(dim=2, keepdim=True), cfg)  # one copy
        results = self.solve_all(probs)
        if self.fused is not None:  # one compiled pass over the host batch (CPU)
            labels = np.stack([res.labels.numpy() for res in results])
            loss, fair, grad = self.fused(logits.numpy(), sigma.numpy(), labels)
            grad = torch.from_numpy(grad)
            self._update(torch.bmm(grad, xb), grad.sum(dim=2))
            self.update_prior(results)
            return torch.from_numpy(loss), torch.from_numpy(fair), logits.detach(), results
        Y = torch.stack([res.labels for res in results])
        rw = self.tracker.shrink_guard(Y)  # (R, b) factors, or None
        if rw is not None:
            rw = torch.from_numpy(rw).to(device=cfg.device, dtype=logits.dtype).unsqueeze(1)
        Y = _transfer.to_device(Y.to(logits.dtype), cfg.device)  # one copy back
        Y = Y.transpose(1, 2).contiguous()
        if self.closed_form:  # the linear heads' gradient without autograd's graph
            loss, fair, grad = _network_loss_grad(
                logits, sigma, Y, cfg.loss, self.prior_dev, cfg.fairness, cfg.fairness_weight,
                rw,
            )  # fmt: skip
            self._update(torch.bmm(grad, xb), grad.sum(dim=2))
        else:
            _scale_rows(logits, rw)  # the rows' gradients times their factors
            loss = ROW_VALUES[cfg.loss](logits, Y).mean(dim=1)  # per restart
            fair = _kl_term(sigma.mean(dim=2), self.prior_dev, cfg.fairness, floor=True)
            self.optimizer.zero_grad(set_to_none=True)
            (loss + cfg.fairness_weight * fair).sum().backward()
            if cfg.decay_by_share:
                self.add_decay(self.heads.weight.grad, self.heads.bias.grad)
            self.optimizer.step()
        self.update_prior(results)
        return loss.detach(), fair.detach(), logits.detach(), results


class _Source:
    """The training data as the batches of the restarts: rows of X gathered and normalised
    (:meth:`Inputs.raw`), or gathered from a normalised copy of X made once (:meth:`tabulate`)."""

    def __init__(self, X, inputs, device):
        self.X, self.inputs, self.device = X, inputs, device
        self.table = None  # the normalised training data (flat X, small enough), or None

    def tabulate(self):
        """Normalise flat X once, on the device, when the copy takes at most
        :data:`TABLE_BYTES` and X is not memory-mapped (each epoch then gathers its batches
        from it instead of normalising them again: the same numbers, the normalisation being
        row-wise)."""
        X = self.X
        n, width = X.shape[0], int(np.prod(X.shape[1:]))
        small = 4 * n * width <= TABLE_BYTES
        # a memory-mapped X is never copied whole (it may not fit in memory)
        if self.inputs.layout == "flat" and small and not is_memory_mapped(X):
            self.table = self.inputs.raw(X, slice(None), self.device)
        return self

    def fetch(self, rows):
        """The rows (R, b) of X as one batch on the device."""
        if self.table is None:
            return self.inputs.raw(self.X, rows.reshape(-1), self.device)
        index = torch.from_numpy(rows.reshape(-1)).to(self.table.device, non_blocking=True)
        return self.table.index_select(0, index)

    def batches(self, orders, size):
        """``(rows, batch)`` of an epoch: consecutive slices of ``size`` of each restart's
        order ``orders[r]``, sorted. (Gathering the next batch on a worker thread while this
        one's problems are solved was measured slower on 2 cores: 8.5-9.4 s against 6.6-7.3 s
        for a Fashion-MNIST fit.)"""
        for b in range(0, orders.shape[1], size):
            rows = np.sort(orders[:, b : b + size], axis=1)
            yield rows, self.fetch(rows)


def _epoch(batched, source, generators, epoch, changes):
    """One epoch of every restart; returns their history entries (``changes``: the
    restarts' :class:`~skcce._engine._label_change.LabelChanges`)."""
    cfg, k, n = batched.cfg, batched.cfg.n_clusters, source.X.shape[0]
    n_runs = len(generators)
    t0 = time.perf_counter()
    orders = np.stack([torch.randperm(n, generator=g).numpy() for g in generators])
    sums = torch.zeros(n_runs, 2, dtype=torch.float64, device=cfg.device)
    counts = torch.zeros(n_runs * k, dtype=torch.int64, device=cfg.device)
    offsets = (torch.arange(n_runs, device=cfg.device) * k)[:, None]
    solver_iter = np.zeros(n_runs, dtype=np.int64)
    unconverged = np.zeros(n_runs, dtype=np.int64)
    for rows, raw in source.batches(orders, cfg.batch_size):
        loss, fair, logits, results = batched.step(raw, rows)
        solver_iter += [res.n_iter for res in results]
        unconverged += [not res.converged for res in results]
        sums += torch.stack([loss, fair], dim=1).to(torch.float64) * rows.shape[1]
        top = logits.max(dim=1).indices  # (R, b); argmax is slow here
        changes.record(rows, top)
        pred = (top + offsets).reshape(-1)
        counts.scatter_add_(0, pred, torch.ones_like(pred))
    sums, counts = sums.cpu().numpy(), counts.cpu().numpy().reshape(n_runs, k)
    changed = changes.end_epoch()
    seconds = time.perf_counter() - t0
    return [
        {
            "epoch": epoch,
            "loss": float(sums[r, 0]) / n,
            "fairness": float(sums[r, 1]) / n,
            "cluster_sizes": counts[r].tolist(),
            "solver_iter": int(solver_iter[r]),
            "solver_unconverged": int(unconverged[r]),
            "relocated": 0,
            "changed": None if changed is None else int(changed[r]),
            "time": seconds,  # the epoch of all restarts together
        }
        for r in range(n_runs)
    ]


def run_batched(X, prepared, cfg, build, seeds, runs, *, callbacks=()):
    """Train restarts ``runs`` (seeds ``seeds[r]``) together; one RunResult per restart.

    Each result carries the restart's training labels, cluster sizes and label-free score
    (:func:`skcce._engine._inference.infer_labels`, one streaming pass per restart), never
    the (N, K) probabilities. The restarts are those :func:`skcce._engine._train.run_single`
    would train, built by the same ``build`` from the same seeds and shuffled by the same
    generators; each result's ``history`` entry ``time`` is the wall time of the epoch of all
    restarts together.
    Ctrl-C ends every restart at the end of the last completed epoch (the last result says
    ``interrupted``).

    Raises
    ------
    FloatingPointError
        A restart's loss or predictions became non-finite (:mod:`skcce._engine._restarts`
        then trains the restarts one by one, which skips the diverged ones).
    """
    runs = list(runs)
    generators = [torch.Generator().manual_seed(int(seeds[r])) for r in runs]
    modules = [build(g, run=r, seed=int(seeds[r])) for g, r in zip(generators, runs, strict=True)]
    if not all(type(m) is nn.Linear for m in modules):
        raise TypeError("batched restarts need the built-in linear head")
    heads = StackedHeads(modules).to(cfg.device)
    n_threads = min(len(runs), cfg.solve_threads)
    # the calling thread solves too (_joined_map): the pool holds the other threads
    pool = ThreadPoolExecutor(n_threads - 1) if n_threads > 1 else None
    try:
        run_seeds = [int(seeds[r]) for r in runs]
        return _train(heads, modules, X, prepared, cfg, generators, runs, callbacks, pool,
                      run_seeds)  # fmt: skip
    finally:
        if pool is not None:
            pool.shutdown()


def _train(heads, modules, X, prepared, cfg, generators, runs, callbacks, pool, seeds):
    batched = _Batched(heads, prepared.inputs, cfg, pool, runs)
    priors = make_tracker(cfg, runs)  # each restart's kind of prior, for the results
    source = _Source(X, prepared.inputs, cfg.device).tabulate()
    histories = [[] for _ in runs]
    # per restart: (weights, epochs, prior masses) of its last completed epoch; a restart
    # whose epoch stop has come keeps that epoch's while the others train on
    done = [None] * len(runs)
    stopped = [False] * len(runs)  # stop_now of each restart's history so far
    active = list(range(len(runs)))  # the restarts in the stack, by position in runs
    changes = LabelChanges(len(runs), X.shape[0], cfg.device)
    for callback in callbacks:
        for r in runs:
            callback.on_run_begin(r, 0)
    try:
        for epoch in range(cfg.max_epochs):
            moved = _relocate(heads, [histories[i] for i in active], batched.tracker.value, X,
                              prepared.inputs, cfg, [seeds[i] for i in active], epoch)  # fmt: skip
            entries = _epoch(batched, source, [generators[i] for i in active], epoch, changes)
            for entry, count in zip(entries, moved, strict=True):
                entry["relocated"] = count
            if not all(np.isfinite(e["loss"]) for e in entries):
                raise FloatingPointError(
                    f"the training loss became non-finite in epoch {epoch}; lower "
                    "learning_rate or check the scale of X"
                )
            masses = batched.tracker.state() if batched.tracker.varies else [None] * len(active)
            for j, i in enumerate(active):  # j: the stack's position, i: the restart's
                if stopped[i]:
                    continue
                histories[i].append(entries[j])
                done[i] = (heads.state_of(j), epoch + 1, masses[j])
                for callback in callbacks:
                    callback.on_epoch_begin(runs[i], epoch)
                # no labels: only a checkpoint reads them, and a batched fit writes none
                # (applies), so no restart's labels are copied off the device every epoch
                state = EpochEnd(runs[i], epoch + 1, histories[i], done[i][0],
                                 batched.optimizer, generators[i], done[i][2])  # fmt: skip
                for callback in callbacks:
                    callback.on_epoch_end(state)
                stopped[i] = stop_now(histories[i], cfg.n_iter_no_change)
            if all(stopped):
                break
            training = [j for j, i in enumerate(active) if not stopped[i]]
            if len(training) < len(active) and batched.keep(training):  # drop the stopped
                changes.keep(training)
                active = [active[j] for j in training]
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    if any(d is None for d in done):  # Ctrl-C before the first epoch ended
        return [RunResult(runs[-1], modules[-1], [], None, None, interrupted=True)]
    results = []
    for i, (r, module) in enumerate(zip(runs, modules, strict=True)):
        module.to(cfg.device).load_state_dict(done[i][0])
        history = histories[i][: done[i][1]]
        labels, score = infer_labels(
            module, X, prepared.inputs, cfg.device, n_clusters=cfg.n_clusters,
            normalised=source.table,
        )  # fmt: skip
        last = interrupted and i == len(runs) - 1  # the caller stops at an interrupted run
        prior = None if done[i][2] is None else priors.prior_of(i, done[i][2])
        sizes = cluster_sizes(labels, cfg.n_clusters)
        results.append(RunResult(r, module, history, labels, score, last, prior, sizes))
    return results


def _relocate(heads, histories, prior, X, inputs, cfg, seeds, epoch) -> list:
    """Before ``epoch``: re-seed each restart's clusters that its last epoch (or, before
    the first, its start) lost (:mod:`skcce._engine._relocate`); how many each restart
    re-seeded."""
    moved = []
    for i, history in enumerate(histories):
        sizes = history[-1]["cluster_sizes"] if history else None  # None: the start's
        donors = relocate_epoch_(heads.weight[i], heads.bias[i], sizes, prior[i], cfg.batch_size,
                                 X, inputs, cfg.device, seeds[i], epoch)  # fmt: skip
        moved.append(len(donors))
    return moved
