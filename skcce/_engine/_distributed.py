"""Data-parallel training over ``torch.distributed``: the global batch and its shards.

The training engine (:mod:`skcce._engine._train`) talks to the other processes only through a
:class:`Context`. With one process (the default) every operation is the identity, so the
single-process engine is the same code path with ``world_size == 1``.

Design (docs/distributed.md has the user's view):

* **Global batch.** ``batch_size`` is the size of the *global* batch. Every rank draws the same
  permutation of the rows per epoch (same generator, same seed), cuts the same global batches
  out of it and takes its own contiguous shard of each (:meth:`Context.shard`: the sizes differ
  by at most one row, so an uneven last batch is split as evenly as it can be). The union of
  the shards of a step is exactly the batch that one process would see.
* **Exact pseudo-labels.** The pseudo-label problem couples the rows of a batch (the E-step's
  column sums, the mean label ȳ, the certified stopping rule). Every rank gathers the float64
  predictions of all shards (:meth:`Context.gather_rows`), solves the *same* global problem
  with the same deterministic solver, and keeps its own rows. Every coupling quantity is
  therefore computed from the whole batch on every rank — a reduction across ranks, done by
  gathering the K-dimensional rows rather than the K-dimensional sums — and the labels are
  bitwise those of one process solving the concatenated batch. The extra cost is one
  B x K all-gather and a redundant B x K solve per step, negligible beside the network.
* **Network loss.** Rank ``r`` minimises ``(W/B) sum_{i in r} H(y_i, sigma_i) +
  w_f KL(u || sigma_bar)`` where ``sigma_bar`` is the *global* mean prediction
  (:meth:`Context.global_sum` of the local column sums, divided by ``B``). DDP averages the
  ranks' gradients (divides by ``W``); the cross-entropy part then gives exactly the gradient
  of the global mean, and the fairness part too because the backward of ``global_sum``
  multiplies by ``W`` (see :class:`_GlobalSum`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch


class _GlobalSum(torch.autograd.Function):
    """Differentiable sum over ranks of a tensor whose downstream loss is the same on every rank.

    Forward: ``all_reduce(SUM)``. Backward: ``W * grad``. The exact backward of a sum over ranks
    is the all-reduce of the ranks' output gradients; here every rank computes the same loss
    from the (bitwise identical) reduced tensor, so those gradients are equal and their sum is
    ``W`` times the local one — no communication is needed in the backward pass, and nothing
    is interleaved with DDP's own gradient reductions.
    """

    @staticmethod
    def forward(ctx, tensor, world_size, group):
        out = tensor.clone(memory_format=torch.contiguous_format)
        torch.distributed.all_reduce(out, group=group)
        ctx.world_size = world_size
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.world_size, None, None


@dataclass
class Context:
    """Which process this is among ``world_size`` data-parallel ranks (1: no distribution).

    Attributes
    ----------
    world_size : int
        Number of ranks ``W``.
    rank : int
        This process's rank in ``[0, W)``.
    group : object
        The ``torch.distributed`` process group (None for one process).
    """

    world_size: int = 1
    rank: int = 0
    group: object = None

    @property
    def active(self) -> bool:
        """True when there is more than one rank."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on rank 0 (the rank that writes checkpoints)."""
        return self.rank == 0

    # ----- sharding --------------------------------------------------------------------
    def bounds(self, n: int) -> np.ndarray:
        """Offsets ``(W + 1,)`` of the contiguous shards of ``n`` rows (sizes differ by <= 1)."""
        if self.world_size == 1:  # one process: the whole batch (a per-step call)
            return np.array([0, n], dtype=np.int64)
        sizes = np.full(self.world_size, n // self.world_size, dtype=np.int64)
        sizes[: n % self.world_size] += 1
        return np.concatenate([[0], np.cumsum(sizes)])

    def shard(self, rows: np.ndarray) -> np.ndarray:
        """This rank's contiguous part of the global batch ``rows``."""
        b = self.bounds(len(rows))
        return rows[b[self.rank] : b[self.rank + 1]]

    # ----- collectives (identity for one process) ---------------------------------------
    def gather_rows(self, local: torch.Tensor, n_total: int) -> torch.Tensor:
        """Concatenate every rank's rows of a global array of ``n_total`` rows, in rank order.

        The shards must be those of :meth:`bounds` (``n_total`` rows split in ``W`` contiguous
        parts); they are padded to the largest shard for the all-gather and trimmed after.
        """
        if not self.active:
            return local
        b = self.bounds(n_total)
        width = int(np.max(np.diff(b)))
        padded = local.new_zeros((width, *local.shape[1:]))
        padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        torch.distributed.all_gather(parts, padded, group=self.group)
        return torch.cat([p[: b[r + 1] - b[r]] for r, p in enumerate(parts)])

    def global_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum over ranks, differentiable (see :class:`_GlobalSum`)."""
        if not self.active:
            return tensor
        return _GlobalSum.apply(tensor, self.world_size, self.group)

    def sum_(self, tensor: torch.Tensor) -> torch.Tensor:
        """In-place sum over ranks of a tensor that needs no gradient; returns it."""
        if self.active:
            torch.distributed.all_reduce(tensor, group=self.group)
        return tensor

    def sum_array(self, values, device) -> np.ndarray:
        """Sum over ranks of a float64 numpy array or list (for per-epoch statistics)."""
        t = torch.as_tensor(np.asarray(values, dtype=np.float64), device=device)
        return self.sum_(t.clone()).cpu().numpy()

    def broadcast(self, obj, device=None):
        """Rank 0's picklable ``obj`` on every rank."""
        if not self.active:
            return obj
        box = [obj]
        torch.distributed.broadcast_object_list(box, src=0, group=self.group, device=device)
        return box[0]

    def sync_buffers(self, module: torch.nn.Module) -> None:
        """Rank 0's buffers (e.g. BatchNorm running statistics) on every rank."""
        if self.active:
            for buf in module.buffers():
                torch.distributed.broadcast(buf, 0, group=self.group)

    def barrier(self):
        """Wait for every rank."""
        if self.active:
            torch.distributed.barrier(group=self.group)

    # ----- model ----------------------------------------------------------------------
    def wrap(self, module: torch.nn.Module, device: torch.device):
        """``(model, restore)``: the module to call in training and a function that undoes it.

        One process: the module itself. Several: a DistributedDataParallel wrapper; on CUDA
        the BatchNorm layers are first swapped for SyncBatchNorm layers (batch statistics of
        the global batch, as one process would compute them) that share their parameters
        and running buffers; ``restore()`` puts the original layers back, so the fitted
        network has plain BatchNorm and runs in one process. On CPU (gloo), BatchNorm keeps
        per-rank statistics: SyncBatchNorm needs GPUs.
        """
        if not self.active:
            return module, lambda: None
        from torch.nn.parallel import DistributedDataParallel

        restore = swap_sync_batchnorm(module, self.group) if device.type == "cuda" else None
        wrapped = DistributedDataParallel(
            module,
            device_ids=[device.index] if device.type == "cuda" else None,
            process_group=self.group,
        )
        return wrapped, restore or (lambda: None)


def swap_sync_batchnorm(module: torch.nn.Module, group=None):
    """Swap the BatchNorm layers below ``module`` for SyncBatchNorm; returns ``restore()``.

    The SyncBatchNorm layers share the parameters and running buffers of the layers they
    replace, so after training ``restore()`` puts the original (now trained) layers back.
    """
    norms = torch.nn.modules.batchnorm._BatchNorm
    swapped = []
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, norms) and not isinstance(child, torch.nn.SyncBatchNorm):
                setattr(parent, name, torch.nn.SyncBatchNorm.convert_sync_batchnorm(child, group))
                swapped.append((parent, name, child))

    def restore():
        for parent, name, child in swapped:
            setattr(parent, name, child)

    return restore


def resolve(distributed) -> Context:
    """The data-parallel context for the estimator's ``distributed`` parameter.

    ``"auto"``: distributed when a ``torch.distributed`` process group is initialised with
    more than one rank (e.g. under ``torchrun``); ``False``: never; ``True``: an initialised
    group is required (a clear error otherwise).
    """
    if not isinstance(distributed, str):
        distributed = bool(distributed)  # numpy booleans too
    dist = torch.distributed
    ready = dist.is_available() and dist.is_initialized()
    if distributed is True and not ready:
        raise ValueError(
            "distributed=True needs an initialised torch.distributed process group: launch "
            "with torchrun and call torch.distributed.init_process_group() before fit"
        )
    if distributed is False or not ready:
        return Context()
    world = dist.get_world_size()
    if world == 1:
        return Context()
    return Context(world_size=world, rank=dist.get_rank(), group=dist.group.WORLD)


def local_device(device: torch.device, ctx: Context) -> torch.device:
    """Under data parallelism, an index-less CUDA device becomes ``cuda:LOCAL_RANK``.

    Raises
    ------
    ValueError
        An NCCL process group with a device other than CUDA (NCCL moves CUDA tensors only).
    """
    if ctx.active and device.type != "cuda":
        backend = str(torch.distributed.get_backend(ctx.group)).lower()
        if backend == "nccl":
            raise ValueError(
                f"the process group uses NCCL, which needs CUDA tensors, but device={device}; "
                "use device='auto' or 'cuda', or init_process_group('gloo') for CPU training"
            )
    if ctx.active and device.type == "cuda" and device.index is None:
        local = int(os.environ.get("LOCAL_RANK", ctx.rank % max(1, torch.cuda.device_count())))
        return torch.device("cuda", local)
    return device
