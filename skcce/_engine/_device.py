"""The one device resolver of skcce: ``device`` parameters are plain strings, resolved at fit."""

from __future__ import annotations

import torch


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def resolve_device(device, *, mps_on_auto: bool = False) -> torch.device:
    """Turn "auto" or a torch device string into a usable :class:`torch.device`.

    Parameters
    ----------
    device : str or torch.device
        "auto" (CUDA when available; then MPS if ``mps_on_auto``; else the CPU) or any torch
        device string.
    mps_on_auto : bool, default=False
        Whether "auto" may pick Apple's MPS. :class:`~skcce.FeatureExtractor` (inference) does;
        :class:`~skcce.CCEClustering` does not (its training is tested on CUDA and CPU).

    Raises
    ------
    ValueError
        Not a device string, or a CUDA/MPS device on a machine without one.

    Examples
    --------
    >>> from skcce._engine._device import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if isinstance(device, torch.device):
        dev = device
    elif device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if mps_on_auto and _mps_available() else "cpu")
    else:
        try:
            dev = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ValueError(f"device={device!r} is not a valid torch device string") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device={device!r} was requested but CUDA is not available on this machine; "
            "use device='auto' or 'cpu'"
        )
    if dev.type == "mps" and not _mps_available():
        raise ValueError(f"device={device!r} was requested but MPS is not available")
    return dev


def loadable_device(device) -> torch.device:
    """The device a model saved on ``device`` loads on here: the CPU when that CUDA or MPS
    device is missing (a model fitted on a GPU unpickles on a CPU-only machine)."""
    dev = torch.device(device)
    if (dev.type == "cuda" and not torch.cuda.is_available()) or (
        dev.type == "mps" and not _mps_available()
    ):
        return torch.device("cpu")
    return dev
