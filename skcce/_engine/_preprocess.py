"""Preprocessing: the layout of X, and the streaming normalisation fitted on it (:class:`Inputs`).

Batches are cut from the user's array and normalised one at a time; nothing here copies X.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from skcce._warn import warn
from skcce.models._defaults import is_linear


def is_memory_mapped(X) -> bool:
    """Whether the array ``X`` reads its values from a memory map (``np.memmap``,
    ``np.load(..., mmap_mode=...)``, or a view of one): such data may be larger than the
    memory, so fit only ever reads it in batches and blocks.

    Examples
    --------
    >>> is_memory_mapped(np.zeros((2, 2)))
    False
    """
    import mmap

    base = X
    while base is not None:
        if isinstance(base, (np.memmap, mmap.mmap)):
            return True
        base = getattr(base, "base", None)
    return False


@dataclass
class Prepared:
    """What fit knows of X once it is read: its layout, one sample's shape, the normalisation."""

    layout: str
    input_shape: tuple
    inputs: Inputs


def prepare(X: np.ndarray, model) -> Prepared:
    """Read X's layout for ``model`` and fit the normalisation (:func:`fit_inputs`)."""
    layout = detect_layout(X, model)
    return Prepared(layout, sample_shape(X, layout), fit_inputs(X, layout))


def detect_layout(X: np.ndarray, model) -> str:
    """The layout of X ("flat", "nhw", "nhwc" or "nchw"), checked against the model kind."""
    if X.ndim == 2:
        if isinstance(model, str) and not is_linear(model):
            raise ValueError(
                f"model={model!r} takes images: X must have shape (N, H, W), (N, H, W, C) or "
                f"(N, C, H, W); got a 2-D array of shape {X.shape}"
            )
        return "flat"
    if is_linear(model):
        raise ValueError(
            f"model='linear' needs a 2-D array (n_samples, n_features); got shape {X.shape}. "
            "Flatten the samples (X.reshape(len(X), -1)) or use an image model such as 'vgg4'"
        )
    if X.ndim == 3:
        return "nhw"
    if X.ndim == 4:
        if X.dtype == np.uint8 and X.shape[-1] in (1, 3):
            return "nhwc"
        if X.shape[1] in (1, 3):
            return "nchw"
        if X.shape[-1] in (1, 3):
            raise ValueError(
                f"float images must be channels-first (N, C, H, W); got shape {X.shape}. "
                "Transpose with X.transpose(0, 3, 1, 2), or pass uint8 (N, H, W, C) images"
            )
        raise ValueError(f"cannot read images of shape {X.shape}: expected 1 or 3 channels")
    raise ValueError(f"X must be 2-D features or 3-D/4-D images; got {X.ndim}-D shape {X.shape}")


def sample_shape(X, layout) -> tuple:
    """The shape of one sample of X as the network sees it (channels first)."""
    if layout == "flat":
        return (X.shape[1],)
    if layout == "nhw":
        return (1, X.shape[1], X.shape[2])
    if layout == "nhwc":
        return (X.shape[3], X.shape[1], X.shape[2])
    return tuple(X.shape[1:])


@dataclass
class Inputs:
    """How to turn rows of the user's array into a normalised float batch on a device.

    Attributes
    ----------
    layout : {"flat", "nhw", "nhwc", "nchw"}
        Layout of the array seen in ``fit`` (``predict`` may use another image layout).
    mean, std : numpy.ndarray
        Flat features: per-feature centre and the global scale (the same value for every
        feature), float64, in units of ``X / scale``. Images: per-channel mean and standard
        deviation (float32) of the image values (uint8 images divided by 255 first).
    whiten : numpy.ndarray or None
        Flat features with ``CCEClustering(whiten=True)``: the (n_features, n_features) map
        that every normalised row is multiplied by (:mod:`skcce._engine._whiten`); None
        otherwise.
    scale : float
        A power of two (exact division) that every non-uint8 input is divided by first.
        Flat features: about the largest ``|x|`` seen in fit, so that the statistics and
        the normalisation never overflow or underflow, whatever the scale of X (1e-30 and
        1e+30 alike). Float images: 1 (they are used as given) unless their largest
        ``|x|`` is outside [2**-64, 2**64]. uint8 images are always divided by 255.

    Notes
    -----
    Flat features are normalised on the host, batch by batch, in float64 (centring a
    float64 column at 1e10 in float32 would lose the data), and only the float32 result
    moves to the device; :meth:`normalize` is then the identity. Images move to the device
    in their own dtype (uint8 images stay 1 byte a pixel) and are normalised there, after
    any augmentation in image space.
    """

    layout: str
    mean: np.ndarray
    std: np.ndarray
    scale: float = 1.0  # class default: models pickled before it existed load unchanged
    whiten: np.ndarray | None = None  # likewise
    _cache: dict = field(default_factory=dict, repr=False)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cache"] = {}  # device tensors are rebuilt on demand (CUDA-free unpickling)
        return state

    def raw(self, X, idx, device, layout=None) -> torch.Tensor:
        """Rows ``idx`` of ``X`` (in ``layout``, default the fitted one) as float32
        (B, *input_shape) on ``device``: images in image space (uint8 scaled to [0, 1]),
        not normalised; flat features already normalised (see the class notes).

        Only the batch is copied: ``X`` itself is never converted or written to.
        """
        layout = layout or self.layout
        fast = self._flat32(X.dtype) if self.layout == "flat" else None
        if fast is not None:  # float32 features: float32 passes on our own copy, same values
            unit, m_hi, inv, c = fast
            if isinstance(idx, slice):
                z = np.array(X[idx], dtype=np.float32, order="C")
            else:  # np.take: a gather of rows about 2.5x faster than X[idx]
                z = np.ascontiguousarray(np.take(X, idx, axis=0))
            # C order whatever X's: a Fortran-ordered X reaches the BLAS with the strides of
            # a C-ordered one, so both predict bit-identically on every CPU
            if unit != 1:
                z *= unit  # a power of two: exact
            z -= m_hi
            z *= inv
            z -= c
            if self.whiten is not None:
                z = z @ self._whiten_as(np.float32)
            return torch.from_numpy(z).to(device=device)
        block = X[idx]  # a view for a slice, a batch-sized copy for an index array
        if self.layout == "flat":
            z = np.multiply(block, 1.0 / self.scale, dtype=np.float64, order="C")  # our own
            z -= self.mean
            z /= self.std
            if self.whiten is not None:
                z = z @ self.whiten
            with np.errstate(over="ignore"):  # far outside the fit's range: inf, which
                z = z.astype(np.float32)  # predict_proba reports as such
            return torch.from_numpy(z).to(device=device)
        if X.dtype != np.uint8 and self.scale != 1.0:
            work = np.float64 if block.dtype == np.float64 else np.float32
            block = np.multiply(block, 1.0 / self.scale, dtype=work)
        elif not (block.flags.c_contiguous and block.flags.writeable):
            # torch.from_numpy warns on read-only arrays: copy the batch, never X
            block = np.array(block, order="C")
        xb = torch.from_numpy(block).to(device=device).to(torch.float32)
        if layout == "nhw":
            xb = xb.unsqueeze(1)
        elif layout == "nhwc":
            xb = xb.permute(0, 3, 1, 2)
        return xb / 255.0 if X.dtype == np.uint8 else xb

    def _whiten_as(self, dtype):
        """The whitening map in ``dtype`` (cached)."""
        key = ("whiten", np.dtype(dtype).str)
        if key not in self._cache:
            self._cache[key] = np.ascontiguousarray(self.whiten, dtype=dtype)
        return self._cache[key]

    def _flat32(self, dtype):
        """Constants of the float32 normalisation of float32 flat features, or None.

        With ``v = x * (1 / scale)`` (exact in float32: ``scale`` is a power of two, so the
        route is bitwise invariant to power-of-two rescaling of X), ``(v - mean) / std`` is
        ``(v - m_hi) * inv - c`` with ``m_hi = float32(mean)``, ``inv = float32(1 / std)``
        and ``c = float32((mean - m_hi) / std)``: ``v - m_hi`` is exact for ``v`` near the
        mean (Sterbenz) and otherwise rounds relative to the result, so the float32 result
        agrees with the float64 route to float32 rounding (tested). Float64 features, a scale
        outside ``[2**-120, 2**120]`` (subnormal data) and a spread outside ``[2**-60, 2**60]``
        of the scale take the float64 route.
        """
        if dtype != np.float32:
            return None
        key = "flat32"
        if key not in self._cache:
            std = np.asarray(self.std, dtype=np.float64)
            mean = np.asarray(self.mean, dtype=np.float64)
            s0 = float(std.flat[0])
            band = 2.0**-60 <= s0 <= 2.0**60 and 2.0**-120 <= self.scale <= 2.0**120
            if bool(np.all(std == s0)) and band:  # one global std, 1 / scale a float32
                m_hi = mean.astype(np.float32)
                inv = np.float32(1.0 / s0)
                c = ((mean - m_hi.astype(np.float64)) / s0).astype(np.float32)
                self._cache[key] = (np.float32(1.0 / self.scale), m_hi, inv, c)
            else:
                self._cache[key] = None
        return self._cache[key]

    def normalize(self, xb: torch.Tensor) -> torch.Tensor:
        """Apply the fitted centring and scaling to a batch from :meth:`raw` (images; flat
        features come out of :meth:`raw` normalised)."""
        if self.layout == "flat":
            return xb
        key = str(xb.device)
        if key not in self._cache:
            shape = (1, -1, 1, 1)
            mean = torch.as_tensor(self.mean, dtype=torch.float32, device=xb.device)
            std = torch.as_tensor(self.std, dtype=torch.float32, device=xb.device)
            self._cache[key] = (mean.view(shape), std.view(shape))
        mean, std = self._cache[key]
        return ((xb - mean) / std).contiguous()

    def batch(self, X, idx, device, layout=None) -> torch.Tensor:
        """Rows ``idx`` of ``X`` as a normalised float32 (B, *input_shape) tensor on device."""
        return self.normalize(self.raw(X, idx, device, layout))


_REDUCE_AXES = {"flat": (0,), "nhw": (0, 2, 3), "nhwc": (0, 1, 2), "nchw": (0, 2, 3)}
_IMAGE_BAND = (2.0**-64, 2.0**64)  # float images inside it are used as given


def _power_of_two(value: float) -> float:
    """The power of two 2**e with value / 2**e in [0.5, 1) (1 for 0)."""
    if value == 0:
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(value)[1])))


def merge_moments(count, mean, m2, block, nb, axes=0):
    """``(count, mean, m2)`` with the float64 ``block`` of ``nb`` values per statistic merged
    in (Chan et al.'s pairwise update; ``block`` is overwritten); ``axes`` are reduced."""
    bmean = block.mean(axis=axes, keepdims=True)
    block -= bmean
    block *= block
    bm2 = block.sum(axis=axes)
    bmean = bmean.reshape(bm2.shape)
    delta = bmean - mean
    total = count + nb
    mean = mean + delta * (nb / total)
    m2 = m2 + bm2 + delta * delta * (count * nb / total)
    return total, mean, m2


def fit_inputs(X: np.ndarray, layout: str, chunk: int | None = None) -> Inputs:
    """Fit the normalisation by streaming over X in chunks (no full float copy of X).

    Flat features: per-feature mean and one global scale (the root mean variance), which keeps
    the relative geometry of the features. Images: per-channel mean and standard deviation.

    Two passes over X, chunk by chunk (``chunk`` rows; default about 2**20 values, 8 MB of
    float64 temporaries): (1) the per-feature/pixel minimum and maximum in X's own dtype,
    which give the power-of-two ``scale`` (see :class:`Inputs`) and the exactly constant
    features; (2) the means and sums of squared deviations of ``X / scale`` in float64,
    combined across chunks by Chan et al.'s pairwise update, which, unlike
    ``E[x^2] - E[x]^2``, keeps the variance of a column far from 0 (1e10 +- 1). A constant
    feature gets variance 0 exactly; a constant channel, or X without any variation,
    a scale of 1.

    Warns
    -----
    UserWarning
        When all samples of X are identical (more than one sample): nothing can separate
        them, so every sample falls in the same cluster.
    """
    n = X.shape[0]
    step = chunk or max(1, (1 << 20) // max(1, int(np.prod(X.shape[1:]))))
    lo = hi = None
    for start in range(0, n, step):
        block = X[start : start + step]
        bmin, bmax = block.min(axis=0), block.max(axis=0)
        lo = bmin if lo is None else np.minimum(lo, bmin)
        hi = bmax if hi is None else np.maximum(hi, bmax)
    identical = bool(np.all(lo == hi))
    if X.dtype == np.uint8:
        scale, unit = 1.0, 255.0
    else:
        peak = max(abs(float(lo.min())), abs(float(hi.max())))
        scale, unit = _power_of_two(peak), 1.0
        if layout != "flat" and _IMAGE_BAND[0] <= peak <= _IMAGE_BAND[1]:
            scale = 1.0
    axes = _REDUCE_AXES[layout]
    count, mean, m2 = 0, 0.0, 0.0
    for start in range(0, n, step):
        block = np.multiply(X[start : start + step], 1.0 / (scale * unit), dtype=np.float64)
        if layout == "nhw":
            block = block[:, None]
        nb = block.size // (block.shape[-1] if layout == "nhwc" else block.shape[1])
        count, mean, m2 = merge_moments(count, mean, m2, block, nb, axes)
    var = m2 / count
    constant = lo == hi  # per feature (flat) or per pixel (images)
    if layout == "flat":
        var = np.where(constant, 0.0, var)
        std = np.full_like(mean, np.sqrt(var.mean()))
    else:
        channel_axes = {"nhw": (0, 1), "nhwc": (0, 1), "nchw": (1, 2)}[layout]
        var = np.where(np.all(constant, axis=channel_axes), 0.0, var)
        std = np.sqrt(var)
    std = np.where(std > 0, std, 1.0)
    if identical and n > 1:
        warn(
            f"all {n} samples of X are identical (every feature is constant): nothing can "
            "separate them, so they all fall in one cluster",
            UserWarning,
        )
    if layout != "flat":
        tiny = np.finfo(np.float32).tiny
        mean, std = mean.astype(np.float32), np.maximum(std, tiny).astype(np.float32)
    return Inputs(layout, mean, std, scale)
