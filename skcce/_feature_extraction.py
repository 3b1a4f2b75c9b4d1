"""Frozen timm backbones as a scikit-learn transformer.

:class:`FeatureExtractor` turns images (arrays, PIL images or file paths) into the pooled
features of a pretrained `timm <https://github.com/huggingface/pytorch-image-models>`_ backbone,
so that ``Pipeline([FeatureExtractor(), CCEClustering(n_clusters=10)])`` clusters photos.

timm, torchvision and Pillow are optional dependencies (``pip install skcce[vision]``); they are
imported when a model is loaded or images are read, never when :mod:`skcce` is imported.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
from numbers import Integral

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from skcce._engine._device import loadable_device, resolve_device
from skcce._engine._io import one_line
from skcce._warn import warn

__all__ = ["FeatureExtractor", "WeightsUnavailableError"]

_VISION_EXTRA = "pip install skcce[vision]"
_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
# torchvision resizes tensors with these modes only; PIL-only modes fall back to bicubic.
_TENSOR_INTERPOLATION = {"nearest": "NEAREST", "bilinear": "BILINEAR", "bicubic": "BICUBIC"}


class WeightsUnavailableError(OSError):
    """Pretrained weights could not be fetched (no network, Hugging Face Hub error, empty cache).

    The message says how to work offline: pass ``weights=`` a local file, or point
    ``HF_HOME`` at a populated Hugging Face cache and set ``HF_HUB_OFFLINE=1``.

    Parameters
    ----------
    message : str
        The full message, with the Python API's advice.
    model_name : str, default=None
        The timm model name.
    reason : str, default=None
        Why the weights could not be had, without advice (``skcce cluster`` words its own,
        with command-line flags).

    Examples
    --------
    >>> from skcce._feature_extraction import WeightsUnavailableError
    >>> issubclass(WeightsUnavailableError, OSError)
    True
    """

    def __init__(self, message, *, model_name=None, reason=None):
        super().__init__(message)
        self.model_name = model_name  # the timm model name, when known
        self.reason = reason  # why, without the advice (the CLI words its own advice)


def _import_vision():
    """Import timm (and check torchvision, Pillow) with an error naming the extra."""
    try:
        import PIL  # noqa: F401
        import timm
        import timm.data
        import torchvision  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            f"FeatureExtractor needs timm, torchvision and Pillow ({exc.name} is missing). "
            f"Install them with `{_VISION_EXTRA}`."
        ) from exc
    return timm


# ----------------------------------------------------------------------------------------------
# Model loading
# ----------------------------------------------------------------------------------------------
def _check_model_name(timm, model_name):
    """Raise a ValueError listing close matches when ``model_name`` is not a timm architecture."""
    if model_name.startswith(("hf-hub:", "hf_hub:", "local-dir:")):
        return
    arch = model_name.split(".", 1)[0]  # "resnet50.a1_in1k" -> "resnet50"
    if timm.is_model(arch):
        return
    close = difflib.get_close_matches(arch, timm.list_models(), n=5, cutoff=0.6)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ValueError(
        f"Unknown timm model_name {model_name!r}.{hint} "
        "See timm.list_models() for the available architectures."
    )


class _CaptureMissingKeys(logging.Handler):
    """Collect timm's 'Missing keys' log records emitted while loading a weights file.

    timm loads checkpoints non-strictly when the classifier is dropped (``num_classes=0``), and
    only *logs* missing keys; a file for another architecture would otherwise silently leave
    the backbone at random initialisation.
    """

    def __init__(self):
        super().__init__(level=logging.INFO)
        self.messages = []

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Missing keys"):
            self.messages.append(message)


def _load_model(model_name, *, pretrained, weights, num_classes=0):
    """Create a timm model without its classifier, optionally loading pretrained weights."""
    timm = _import_vision()
    _check_model_name(timm, model_name)
    if weights is not None:
        path = os.fspath(weights)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"weights file not found: {path!r}")
        logger = logging.getLogger("timm.models._builder")
        handler = _CaptureMissingKeys()
        old_level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            model = timm.create_model(
                model_name,
                pretrained=True,
                num_classes=num_classes,
                pretrained_cfg_overlay=dict(file=path),
            )
        except Exception as exc:
            problem = (
                "does not fit" if "loading state_dict" in str(exc) else "could not be loaded into"
            )
            raise ValueError(
                f"weights file {path!r} {problem} timm model {model_name!r}: "
                f"{type(exc).__name__}: {one_line(str(exc), 200)}"
            ) from exc
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
        if handler.messages:
            raise ValueError(
                f"weights file {path!r} does not fit timm model {model_name!r}: "
                f"{one_line(handler.messages[0], 300)}"
            )
        return model
    if not pretrained:
        return timm.create_model(model_name, pretrained=False, num_classes=num_classes)
    from skcce._weights import hub_access, unavailable_message

    with hub_access() as access:
        try:
            return timm.create_model(model_name, pretrained=True, num_classes=num_classes)
        except Exception as exc:
            cause = f"{type(exc).__name__}: {one_line(str(exc), 200)}"
            reason = access.reason() or cause
            if access.reason() and type(exc).__name__ not in _CACHE_MISSES:
                reason = f"{reason} ({cause})"  # something else went wrong too: say what
            raise WeightsUnavailableError(
                unavailable_message(model_name, reason), model_name=model_name, reason=reason
            ) from exc


# The Hub library's errors for "not cached, and offline": the reason already says so.
_CACHE_MISSES = ("LocalEntryNotFoundError", "OfflineModeIsEnabled")


# ----------------------------------------------------------------------------------------------
# Input handling
# ----------------------------------------------------------------------------------------------
def _as_source(X):
    """Classify the input; return ``(kind, data)`` with kind in {"array", "pil", "paths"}.

    Arrays are validated for layout and returned as is (batches are sliced lazily); lists are
    checked for homogeneous element types. No image is read here.
    """
    from PIL import Image

    if isinstance(X, (str, bytes, os.PathLike)):
        raise ValueError(
            "X must be a sequence of images or image paths, got a single path. Wrap it in a list, "
            "or use `skcce cluster FOLDER` to cluster a folder."
        )
    if isinstance(X, Image.Image):
        raise ValueError("X must be a sequence of images; wrap a single PIL image in a list.")
    if isinstance(X, np.ndarray) and X.dtype.kind in "OUS" and X.ndim == 1:
        X = X.tolist()
    if isinstance(X, (np.ndarray, torch.Tensor)):
        return "array", _check_array(X)
    try:
        items = list(X)
    except TypeError as exc:
        raise ValueError(
            f"X must be an array of images or a sequence of images/paths, got {type(X).__name__}"
        ) from exc
    if not items:
        raise ValueError(
            "Found array with 0 sample(s) (shape=(0,)) while a minimum of 1 is required."
        )
    if all(isinstance(x, (str, os.PathLike)) for x in items):
        return "paths", [os.fspath(x) for x in items]
    if all(isinstance(x, Image.Image) for x in items):
        return "pil", items
    if all(isinstance(x, (np.ndarray, torch.Tensor, list, tuple)) for x in items):
        shapes = {tuple(np.shape(x)) for x in items}
        if len(shapes) > 1:
            listed = ", ".join(str(s) for s in sorted(shapes)[:4]) + (
                ", ..." if len(shapes) > 4 else ""
            )
            raise ValueError(
                f"X is a list of arrays with different shapes ({listed}). "
                "Arrays must share one size to be batched; pass PIL images or file paths "
                "(resized one by one) or resize the arrays first."
            )
        arrays = [x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x) for x in items]
        return "array", _check_array(np.stack(arrays))
    kinds = sorted({type(x).__name__ for x in items})
    raise ValueError(
        "X must be an array of images, or a list of only PIL images, only arrays of one shape, "
        f"or only file paths (str or pathlib.Path); got a list mixing {', '.join(kinds)}."
    )


def _check_array(X):
    """Validate an image array's dtype and layout; return it unchanged (or integer -> uint8)."""
    if X.ndim == 0 or X.shape[0] == 0:
        raise ValueError(
            f"Found array with 0 sample(s) (shape={tuple(X.shape)}) "
            "while a minimum of 1 is required."
        )
    is_torch = isinstance(X, torch.Tensor)
    floating = X.is_floating_point() if is_torch else X.dtype.kind == "f"
    if not floating:
        uint8 = X.dtype == (torch.uint8 if is_torch else np.uint8)
        integer = (
            (not X.is_complex() and X.dtype != torch.bool) if is_torch else X.dtype.kind in "iu"
        )
        if not uint8:
            if not integer:
                raise ValueError(
                    f"image arrays must be uint8 or floating point, got dtype {X.dtype}"
                )
            lo, hi = (int(X.min()), int(X.max()))
            if lo < 0 or hi > 255:
                raise ValueError(
                    f"integer image arrays must hold values in [0, 255], got [{lo}, {hi}]; "
                    "pass uint8 images, or floats in [0, 1] shaped (N, C, H, W)"
                )
            X = X.to(torch.uint8) if is_torch else X.astype(np.uint8)
        if X.ndim == 3:
            return X  # (N, H, W) grey
        if X.ndim == 4 and X.shape[-1] in (1, 3, 4):
            return X  # (N, H, W, C)
        raise ValueError(
            "uint8 image arrays must be shaped (N, H, W, C) with C in {1, 3, 4} or (N, H, W) "
            f"for grey images; got shape {tuple(X.shape)}. Channels-first uint8 arrays can be "
            "passed as X.transpose(0, 2, 3, 1)."
        )
    if X.ndim == 3:
        return X  # (N, H, W) grey floats
    if X.ndim == 4 and X.shape[1] in (1, 3):
        return X  # (N, C, H, W)
    raise ValueError(
        "floating point image arrays must be shaped (N, C, H, W) with C in {1, 3} and values in "
        f"[0, 1], or (N, H, W) for grey images; got shape {tuple(X.shape)}. Channels-last float "
        "arrays can be passed as X.transpose(0, 3, 1, 2)."
    )


def _array_batch_to_tensor(batch):
    """(B, H, W[, C]) uint8 or (B, [C,] H, W) float -> (B, 3, H, W) tensor, same dtype."""
    t = batch if isinstance(batch, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(batch))
    if t.dtype == torch.uint8:
        t = t[:, None] if t.ndim == 3 else t.permute(0, 3, 1, 2)[:, :3]  # drop alpha
    else:
        if t.dtype == torch.float64:
            t = t.float()
        t = t[:, None] if t.ndim == 3 else t
    if t.shape[1] == 1:
        t = t.expand(-1, 3, -1, -1)
    return t


def _resize_crop(x, data_config):
    """Apply timm's eval resize + crop (``transforms_imagenet_eval``) to a (B, 3, H, W) tensor.

    uint8 tensors are resized in uint8 (rounded like Pillow); float tensors stay float.
    """
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2 import functional as TF

    _, th, tw = data_config["input_size"]
    crop_pct = data_config.get("crop_pct") or 0.875  # timm's DEFAULT_CROP_PCT
    crop_mode = data_config.get("crop_mode") or "center"
    interp_name = _TENSOR_INTERPOLATION.get(data_config.get("interpolation"), "BICUBIC")
    interp = getattr(InterpolationMode, interp_name)
    sh, sw = math.floor(th / crop_pct), math.floor(tw / crop_pct)
    h, w = x.shape[-2:]
    if crop_mode == "squash":
        x = TF.resize(x, [sh, sw], interpolation=interp, antialias=True)
        return TF.center_crop(x, [th, tw])
    if crop_mode == "border":
        ratio = max(h / sh, w / sw)
        x = TF.resize(x, [round(h / ratio), round(w / ratio)], interpolation=interp, antialias=True)
        return _center_crop_or_pad(x, th, tw, data_config["mean"])
    if sh == sw:  # torchvision shortest-edge resize, as timm does for square targets
        x = TF.resize(x, [sh], interpolation=interp, antialias=True)
    else:
        ratio = min(h / sh, w / sw)
        x = TF.resize(x, [round(h / ratio), round(w / ratio)], interpolation=interp, antialias=True)
    return TF.center_crop(x, [th, tw])


def _center_crop_or_pad(x, th, tw, mean):
    """Pad with the mean colour to at least (th, tw), then center crop (timm's border mode)."""
    h, w = x.shape[-2:]
    if th > h or tw > w:
        fill = torch.tensor(mean, dtype=torch.float32, device=x.device)
        if x.dtype == torch.uint8:
            fill = torch.round(fill * 255)
        canvas = fill.to(x.dtype).view(1, 3, 1, 1).expand(x.shape[0], 3, max(h, th), max(w, tw))
        canvas = canvas.clone()
        top, left = (max(th - h, 0)) // 2, (max(tw - w, 0)) // 2
        canvas[:, :, top : top + h, left : left + w] = x
        x = canvas
        h, w = x.shape[-2:]
    top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
    return x[:, :, top : top + th, left : left + tw]


def _normalize(x, data_config):
    """uint8 or [0, 1] float (B, 3, H, W) -> float32 normalised with the config's mean/std."""
    x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
    mean = torch.tensor(data_config["mean"], dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(data_config["std"], dtype=torch.float32, device=x.device).view(1, 3, 1, 1)
    return (x - mean) / std


def _preprocess_array_batch(batch, data_config, device):
    """Raw array batch -> normalised (B, 3, H', W') float32 tensor on ``device``."""
    x = _array_batch_to_tensor(batch).to(device, non_blocking=True)
    return _normalize(_resize_crop(x, data_config), data_config)


class _ImageDataset(torch.utils.data.Dataset):
    """Reads one image (path or PIL image) at a time and applies timm's eval transform.

    Failures are returned as a message rather than raised, so that the main process can name
    the file in a clean error instead of a worker traceback.
    """

    def __init__(self, items, transform, input_size):
        self.items = items
        self.transform = transform
        self.input_size = tuple(input_size)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        from PIL import Image

        item = self.items[index]
        try:
            if isinstance(item, Image.Image):
                image = item.convert("RGB")
            else:
                with Image.open(item) as im:
                    image = im.convert("RGB")
            return self.transform(image), ""
        except Exception as exc:  # noqa: BLE001 - reported with the file name by the caller
            return torch.zeros(self.input_size), f"{type(exc).__name__}: {one_line(str(exc), 200)}"


# ----------------------------------------------------------------------------------------------
# The estimator
# ----------------------------------------------------------------------------------------------
class FeatureExtractor(TransformerMixin, BaseEstimator):
    """Pooled features of a frozen timm backbone, as a scikit-learn transformer.

    ``fit`` loads the model (it learns nothing from ``X``, which is only validated);
    ``transform`` preprocesses images exactly like timm's evaluation transform for the model
    (resize, center crop, normalise with the model's mean/std) and returns the pooled,
    classifier-free features ``timm.create_model(model_name, num_classes=0)(x)``.

    Parameters
    ----------
    model_name : str, default="resnet50"
        A timm model name (``timm.list_models()``), optionally with a pretrained tag such as
        ``"resnet50.a1_in1k"``, or ``"hf-hub:org/name"``.
    pretrained : bool, default=True
        Load pretrained weights (downloaded by timm from the Hugging Face Hub on first use and
        cached). When the Hub cannot be reached (or ``HF_HUB_OFFLINE`` is set) cached weights
        are loaded at once and missing ones raise :class:`WeightsUnavailableError` within
        seconds (see ``docs/cluster_command.md``). ``False`` gives randomly initialised
        weights, for tests.
    weights : str or path-like, default=None
        A local weights file (``.safetensors``, ``.pth``, ``.bin``; a state dict or a checkpoint
        holding one under ``"state_dict"``/``"model"``) to load instead of downloading, for
        machines without network. Classifier weights in the file are dropped. Requires
        ``pretrained=True``.
    batch_size : int, default=64
        Images per forward pass. Memory use is bounded by the batch, not by the number of images.
    device : str, default="auto"
        ``"auto"`` (CUDA if available, else MPS, else CPU), or a torch device string such as
        ``"cpu"``, ``"cuda"``, ``"cuda:1"``. Resolved in ``fit``; see ``device_``.
    num_workers : int, default=0
        DataLoader worker processes decoding image files / PIL images. Arrays are sliced in the
        main process.
    dtype : {"float16", "bfloat16", "float32"}, default=None
        Autocast dtype of the forward pass on CUDA; ignored on other devices. The output is
        float32 in every case.
    image_size : int or tuple of (int, int), default=None
        Input resolution (height, width) fed to the model; overrides the model's default
        ``input_size`` (the resize before the center crop scales with it).
    verbose : int, default=0
        Show a tqdm progress bar over batches when > 0.

    Attributes
    ----------
    model_ : torch.nn.Module
        The timm model in eval mode, frozen, channels-last, on ``device_``.
    device_ : str
        The device the model runs on.
    data_config_ : dict
        timm's resolved preprocessing config (``input_size``, ``interpolation``, ``mean``,
        ``std``, ``crop_pct``, ``crop_mode``).
    n_features_out_ : int
        Number of output features (``model_.num_features``).

    See Also
    --------
    skcce.CCEClustering : Clusters the features.

    Notes
    -----
    **Inputs.** ``transform`` accepts

    - uint8 arrays shaped ``(N, H, W, C)`` (C = 3 RGB, 1 grey, 4 RGBA whose alpha is dropped)
      or ``(N, H, W)`` grey, with values in [0, 255];
    - floating point arrays shaped ``(N, C, H, W)`` (C = 3 or 1) or ``(N, H, W)`` with values
      in [0, 1] (not yet normalised; the model's mean/std are applied here);
    - torch tensors with the same layouts, and lists of equally shaped arrays;
    - lists of PIL images (any sizes and modes; converted to RGB);
    - lists of file paths (``str`` or :class:`pathlib.Path`), read lazily one batch at a time
      by a :class:`torch.utils.data.DataLoader` with ``num_workers`` workers, so a folder of
      a million photos never sits in memory.

    Grey images are replicated to three channels. Arrays are preprocessed batch-wise with tensor
    operations on ``device`` (uint8 resized in uint8 like Pillow); PIL images and files go
    through timm's own ``create_transform``. The two agree up to resampling round-off.

    **Errors.** A file that is missing, not an image or corrupt raises an error naming it
    (``FileNotFoundError`` or ``ValueError``): ``transform`` must return one row per input, so
    bad files are never silently skipped. An unknown ``model_name`` raises ``ValueError`` listing
    close matches; a weights file that does not fit the model raises ``ValueError``; failing to
    download pretrained weights raises :class:`WeightsUnavailableError` (an ``OSError``) that
    explains how to work offline (``weights=``, or ``HF_HOME`` + ``HF_HUB_OFFLINE=1``).

    **Pickling.** The model is pickled as a CPU state dict and rebuilt with timm (without
    downloading) when unpickled, so an extractor fitted on CUDA loads on a CPU-only machine
    (``device_`` then falls back to ``"cpu"``). This also makes ``Pipeline(memory=...)``
    caching work: parameters are plain values that joblib hashes cleanly. Unpickling needs timm.

    Examples
    --------
    >>> import numpy as np
    >>> from skcce._feature_extraction import FeatureExtractor
    >>> X = np.random.default_rng(0).integers(0, 256, size=(4, 40, 40, 3), dtype=np.uint8)
    >>> fe = FeatureExtractor("test_resnet", pretrained=False, image_size=32, device="cpu")
    >>> features = fe.fit_transform(X)
    >>> features.shape, features.dtype
    ((4, 96), dtype('float32'))
    """

    _parameter_constraints: dict = {
        "model_name": [str],
        "pretrained": ["boolean"],
        "weights": [str, os.PathLike, None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "device": [str],
        "num_workers": [Interval(Integral, 0, None, closed="left")],
        "dtype": [StrOptions(set(_DTYPES)), None],
        "image_size": [Interval(Integral, 1, None, closed="left"), tuple, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        model_name="resnet50",
        *,
        pretrained=True,
        weights=None,
        batch_size=64,
        device="auto",
        num_workers=0,
        dtype=None,
        image_size=None,
        verbose=0,
    ):
        self.model_name = model_name
        self.pretrained = pretrained
        self.weights = weights
        self.batch_size = batch_size
        self.device = device
        self.num_workers = num_workers
        self.dtype = dtype
        self.image_size = image_size
        self.verbose = verbose

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True  # fit loads the model
        tags.non_deterministic = True  # GPU kernels and autocast are not bit-reproducible
        tags.input_tags.two_d_array = False  # images, not tabular data
        tags.input_tags.three_d_array = True
        tags.input_tags.string = True  # lists of file paths
        tags.target_tags.required = False
        tags.transformer_tags.preserves_dtype = []  # always float32
        return tags

    # -- fitting ---------------------------------------------------------------------------
    def _image_size(self):
        if self.image_size is None:
            return None
        size = self.image_size
        if isinstance(size, Integral):
            return (int(size), int(size))
        if len(size) != 2 or not all(isinstance(s, Integral) and s > 0 for s in size):
            raise ValueError(
                f"image_size must be a positive int or a (height, width) tuple, got {size!r}"
            )
        return (int(size[0]), int(size[1]))

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Load the backbone; ``X`` is only validated (no image is read).

        Parameters
        ----------
        X : array-like or list of PIL images or list of paths
            Images, in any form accepted by :meth:`transform`.
        y : None
            Ignored.

        Returns
        -------
        self : FeatureExtractor
            The fitted extractor.

        Examples
        --------
        >>> import numpy as np
        >>> from skcce._feature_extraction import FeatureExtractor
        >>> X = np.zeros((2, 16, 16), dtype=np.uint8)
        >>> fe = FeatureExtractor("test_resnet", pretrained=False, image_size=16).fit(X)
        >>> fe.n_features_out_
        96
        """
        _import_vision()
        _as_source(X)
        image_size = self._image_size()
        if self.weights is not None and not self.pretrained:
            raise ValueError(
                "weights= was given with pretrained=False; set pretrained=True to load the file"
            )
        device = str(resolve_device(self.device, mps_on_auto=True))
        model = _load_model(self.model_name, pretrained=self.pretrained, weights=self.weights)
        self._fitted_model_name = self.model_name  # rebuilt from this name when unpickled
        self._set_model(model, device)
        self.data_config_ = self._resolve_data_config(model, image_size)
        self.n_features_out_ = int(model.num_features)
        return self

    def _set_model(self, model, device):
        model.eval()
        model.requires_grad_(False)
        model.to(device=device, memory_format=torch.channels_last)
        self.model_ = model
        self.device_ = device

    @staticmethod
    def _resolve_data_config(model, image_size):
        from timm.data import resolve_data_config

        args = {} if image_size is None else {"input_size": (3, *image_size)}
        config = resolve_data_config(args, model=model)
        return {key: (tuple(v) if isinstance(v, list) else v) for key, v in config.items()}

    # -- transforming ----------------------------------------------------------------------
    def transform(self, X):
        """Compute the backbone's pooled features.

        Parameters
        ----------
        X : array-like or list of PIL images or list of paths
            ``N`` images: uint8 ``(N, H, W, C)`` / ``(N, H, W)``, float ``(N, C, H, W)`` in
            [0, 1], a list of PIL images or a list of file paths (see Notes of the class).

        Returns
        -------
        features : ndarray of shape ``(N, n_features_out_)``, dtype float32
            One row per image, in input order.

        Examples
        --------
        >>> import numpy as np
        >>> from PIL import Image
        >>> from skcce._feature_extraction import FeatureExtractor
        >>> images = [Image.new("RGB", (30, 20)), Image.new("L", (12, 40))]
        >>> fe = FeatureExtractor("test_resnet", pretrained=False, image_size=32).fit(images)
        >>> fe.transform(images).shape
        (2, 96)
        """
        check_is_fitted(self, "model_")
        kind, data = _as_source(X)
        n = len(data)
        out = np.empty((n, self.n_features_out_), dtype=np.float32)
        progress = self._progress(n)
        with torch.inference_mode():
            start = 0
            for batch in self._batches(kind, data):
                features = self._forward(batch)
                out[start : start + len(features)] = features
                start += len(features)
                progress.update(len(features))
        progress.close()
        return out

    def _progress(self, n):
        from tqdm.auto import tqdm

        return tqdm(total=n, unit="img", disable=not self.verbose, desc="FeatureExtractor")

    def _batches(self, kind, data):
        """Yield normalised (B, 3, H, W) float32 tensors on ``device_``."""
        config = self.data_config_
        bs = self.batch_size
        if kind == "array":
            warned = False
            for start in range(0, len(data), bs):
                batch = data[start : start + bs]
                if not warned and batch.dtype not in (np.uint8, torch.uint8):
                    top = float(batch.max())
                    if top > 1.0 + 1e-3:
                        warn(
                            f"float images are expected in [0, 1] but the values reach {top:.4g}; "
                            "divide by 255 or pass uint8 arrays",
                            UserWarning,
                        )
                        warned = True
                yield _preprocess_array_batch(batch, config, self.device_)
            return
        from timm.data import create_transform

        transform = create_transform(**config)
        dataset = _ImageDataset(data, transform, config["input_size"])
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_size=bs,
            shuffle=False,
            num_workers=self.num_workers,
            pin_memory=self.device_.startswith("cuda"),
        )
        start = 0
        for images, errors in loader:
            for offset, error in enumerate(errors):
                if error:
                    item = data[start + offset]
                    name = repr(item) if kind == "paths" else f"PIL image at index {start + offset}"
                    if error.startswith("FileNotFoundError"):
                        raise FileNotFoundError(f"image file not found: {name}")
                    raise ValueError(f"could not read image {name}: {error}")
            start += len(errors)
            yield images.to(self.device_, non_blocking=True)

    def _forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        device_type = torch.device(self.device_).type
        if self.dtype is not None and device_type == "cuda":
            with torch.autocast(device_type="cuda", dtype=_DTYPES[self.dtype]):
                features = self.model_(x)
        else:
            features = self.model_(x)
        return features.float().cpu().numpy()

    def get_feature_names_out(self, input_features=None):
        """Output feature names ``featureextractor0, featureextractor1, ...``.

        Parameters
        ----------
        input_features : None
            Ignored (the inputs are images).

        Returns
        -------
        feature_names_out : ndarray of str objects, shape ``(n_features_out_,)``

        Examples
        --------
        >>> import numpy as np
        >>> from skcce._feature_extraction import FeatureExtractor
        >>> fe = FeatureExtractor("test_resnet", pretrained=False).fit(np.zeros((1, 8, 8), "uint8"))
        >>> fe.get_feature_names_out()[:2]
        array(['featureextractor0', 'featureextractor1'], dtype=object)
        """
        check_is_fitted(self, "n_features_out_")
        prefix = type(self).__name__.lower()
        return np.asarray([f"{prefix}{i}" for i in range(self.n_features_out_)], dtype=object)

    # -- pickling --------------------------------------------------------------------------
    def __getstate__(self):
        state = super().__getstate__()
        state = dict(state)
        model = state.pop("model_", None)
        if model is not None:
            state["_model_state"] = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        return state

    def __setstate__(self, state):
        state = dict(state)
        model_state = state.pop("_model_state", None)
        super().__setstate__(state)
        if model_state is not None:
            timm = _import_vision()
            model = timm.create_model(self._fitted_model_name, pretrained=False, num_classes=0)
            model.load_state_dict(model_state)
            self._set_model(model, str(loadable_device(self.device_)))
