"""The transfer points between an accelerator and the host, for the pseudo-label step.

Every copy of pseudo-label data between a device and the host goes through :func:`to_host`
or :func:`to_device`, so that their number per solve is fixed by construction and can be
counted: the tests patch these two functions (``tests/test_transfers.py``) and count the
calls of a fit and of a solve on the CPU, where both are no-ops.

On CUDA the compiled kernels solve a batch's problem on the host
(:mod:`skcce.solvers._compiled`): one device-to-host copy of the probabilities (with the
warm start and the prior in the same copy), the whole certified solve on the host with no
synchronisation of the device, and one host-to-device copy of the labels. A mini-batch's
problem is small (``B x K`` numbers) and its solve is a few hundred sequential,
data-dependent steps, which a CPU core does faster than a GPU can launch kernels for them.
"""

from __future__ import annotations

import torch


def to_host(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the CPU (itself when it is there already): the one device-to-host copy."""
    return t if t.device.type == "cpu" else t.to("cpu")


def to_device(t: torch.Tensor, device) -> torch.Tensor:
    """``t`` on ``device`` (itself when it is there already): the one host-to-device copy.

    The copy is asynchronous when the source is pinned; either way the host does not wait
    for the device's queued work.
    """
    device = torch.device(device)
    if t.device == device:
        return t
    return t.to(device, non_blocking=True)
