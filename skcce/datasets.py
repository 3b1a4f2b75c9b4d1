"""Loaders for the paper's image datasets, returned as numpy arrays.

``load_dataset(name)`` reads MNIST, Fashion-MNIST, CIFAR-10, CIFAR-100-20 (the 20 coarse
superclasses) and STL-10 (its labelled train and test splits) from the folder layout that
torchvision's dataset classes create, so a folder already populated by torchvision is
reused as it is. Downloading (``download=True``) is delegated to torchvision's dataset
classes (their mirrors and checksums); the files on disk are then parsed here by small
readers of the original formats: IDX for the MNIST family, Python pickles for CIFAR, raw
binaries for STL-10. (torchvision's own CIFAR/STL-10 readers check the MD5 of every file,
which rules out small test fixtures, and do not expose CIFAR-100's coarse labels.)

Fashion-MNIST is also read, without any download, from the files of Debian's
``dataset-fashion-mnist`` package in ``/usr/share/datasets/fashion-mnist/``.
"""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path

import numpy as np

from skcce._lazy import import_extra

__all__ = [
    "CIFAR100_COARSE_OF_FINE",
    "DATASET_NAMES",
    "DEBIAN_FASHION_MNIST_DIR",
    "get_data_home",
    "load_dataset",
    "read_idx",
]

#: Names accepted by :func:`load_dataset`.
DATASET_NAMES: tuple[str, ...] = ("mnist", "fashion-mnist", "cifar10", "cifar100-20", "stl10")

#: Where Debian's ``dataset-fashion-mnist`` package installs the IDX files.
DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

_SPLITS = ("train", "test", "all")

# ---------------------------------------------------------------------------- CIFAR-100

# The 20 superclasses of CIFAR-100 (Krizhevsky 2009), each with its 5 fine classes given by
# their index in the alphabetical list of fine label names (meta["fine_label_names"]).
_CIFAR100_SUPERCLASSES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("aquatic_mammals", (4, 30, 55, 72, 95)),  # beaver dolphin otter seal whale
    ("fish", (1, 32, 67, 73, 91)),  # aquarium_fish flatfish ray shark trout
    ("flowers", (54, 62, 70, 82, 92)),  # orchid poppy rose sunflower tulip
    ("food_containers", (9, 10, 16, 28, 61)),  # bottle bowl can cup plate
    ("fruit_and_vegetables", (0, 51, 53, 57, 83)),  # apple mushroom orange pear sweet_pepper
    ("household_electrical_devices", (22, 39, 40, 86, 87)),  # clock keyboard lamp tel. tv
    ("household_furniture", (5, 20, 25, 84, 94)),  # bed chair couch table wardrobe
    ("insects", (6, 7, 14, 18, 24)),  # bee beetle butterfly caterpillar cockroach
    ("large_carnivores", (3, 42, 43, 88, 97)),  # bear leopard lion tiger wolf
    ("large_man-made_outdoor_things", (12, 17, 37, 68, 76)),  # bridge castle house road sky.
    ("large_natural_outdoor_scenes", (23, 33, 49, 60, 71)),  # cloud forest mountain plain sea
    ("large_omnivores_and_herbivores", (15, 19, 21, 31, 38)),  # camel cattle chimp eleph. kang.
    ("medium_mammals", (34, 63, 64, 66, 75)),  # fox porcupine possum raccoon skunk
    ("non-insect_invertebrates", (26, 45, 77, 79, 99)),  # crab lobster snail spider worm
    ("people", (2, 11, 35, 46, 98)),  # baby boy girl man woman
    ("reptiles", (27, 29, 44, 78, 93)),  # crocodile dinosaur lizard snake turtle
    ("small_mammals", (36, 50, 65, 74, 80)),  # hamster mouse rabbit shrew squirrel
    ("trees", (47, 52, 56, 59, 96)),  # maple oak palm pine willow
    ("vehicles_1", (8, 13, 48, 58, 90)),  # bicycle bus motorcycle pickup_truck train
    ("vehicles_2", (41, 69, 81, 85, 89)),  # lawn_mower rocket streetcar tank tractor
)


def _coarse_of_fine() -> np.ndarray:
    table = np.full(100, -1, dtype=np.int64)
    for coarse, (_name, fines) in enumerate(_CIFAR100_SUPERCLASSES):
        table[list(fines)] = coarse
    if (table < 0).any():  # pragma: no cover - guards the table above
        raise RuntimeError("CIFAR-100 superclass table does not cover all 100 classes")
    return table


#: ``CIFAR100_COARSE_OF_FINE[fine]`` is the superclass (0..19) of CIFAR-100 fine class
#: ``fine`` (0..99); used when a file carries only fine labels.
CIFAR100_COARSE_OF_FINE: np.ndarray = _coarse_of_fine()
CIFAR100_COARSE_OF_FINE.flags.writeable = False


# ---------------------------------------------------------------------------- helpers


def get_data_home(root: str | os.PathLike | None = None) -> Path:
    """The folder datasets are read from and downloaded to.

    Parameters
    ----------
    root : str, os.PathLike or None, default=None
        Explicit folder. ``None``: the environment variable ``SKCCE_DATA`` if set, else
        ``~/.cache/skcce/datasets``.

    Returns
    -------
    root : pathlib.Path
        The folder, ``~`` expanded (not created).

    Examples
    --------
    >>> get_data_home("/tmp/data").as_posix()
    '/tmp/data'
    """
    if root is None:
        root = os.environ.get("SKCCE_DATA") or Path("~") / ".cache" / "skcce" / "datasets"
    return Path(root).expanduser()


def _import_torchvision_datasets():
    return import_extra(
        "torchvision.datasets",
        "download=True fetches datasets with torchvision; install it with "
        "`pip install skcce[vision]`, or place the files yourself.",
    )


_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | os.PathLike, *, expected_dtype=np.uint8) -> np.ndarray:
    """Read an IDX file (the MNIST format), plain or gzip-compressed.

    Layout: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dimensions ``n``, ``n`` big-endian uint32
    sizes, then the values in C order, big-endian.

    Parameters
    ----------
    path : str or os.PathLike
        The file; a name ending in ``.gz`` is decompressed.
    expected_dtype : numpy dtype or None, default=numpy.uint8
        Raise unless the file's type matches (``None``: accept any).

    Returns
    -------
    array : numpy.ndarray of shape (d1, ..., dn)
        The values, native byte order.

    Raises
    ------
    ValueError
        Bad magic number, unexpected type, or a truncated / over-long / unreadable file.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny-idx1-ubyte")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(bytes([0, 0, 8, 1]) + (3).to_bytes(4, "big") + bytes([7, 8, 9]))
    >>> read_idx(path)
    array([7, 8, 9], dtype=uint8)
    """
    path = Path(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            raw = path.read_bytes()
    except (OSError, EOFError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"Corrupt IDX file {str(path)!r}: {exc}") from exc
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise ValueError(
            f"{str(path)!r} is not an IDX file (bad magic number {raw[:4].hex() or 'empty'})"
        )
    dtype = _IDX_DTYPES[raw[2]]
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"Truncated IDX file {str(path)!r}: header cut short")
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    if expected_dtype is not None and dtype.newbyteorder("=") != np.dtype(expected_dtype):
        raise ValueError(
            f"IDX file {str(path)!r} holds {dtype.newbyteorder('=')}, expected "
            f"{np.dtype(expected_dtype)}"
        )
    n_bytes = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    body = len(raw) - header
    if body < n_bytes:
        raise ValueError(
            f"Truncated IDX file {str(path)!r}: header announces shape {dims} "
            f"({n_bytes} bytes of data) but only {body} bytes follow"
        )
    if body > n_bytes:
        raise ValueError(
            f"Corrupt IDX file {str(path)!r}: {body - n_bytes} unexpected bytes after the data"
        )
    arr = np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler that only rebuilds numpy arrays (what the CIFAR files contain)."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),  # bytes in protocol-2 pickles written by Python 3
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dataset file")


def _load_pickle(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            obj = _ArrayUnpickler(f, encoding="latin1").load()
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise ValueError(
            f"Corrupt or truncated dataset file {str(path)!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(obj, dict):
        raise ValueError(f"Corrupt dataset file {str(path)!r}: expected a dict")
    # Python 2 pickles may carry bytes keys
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _missing(name: str, where: Path, files, extra: str = "") -> FileNotFoundError:
    return FileNotFoundError(
        f"Dataset {name!r} not found: missing {', '.join(map(str, files))} in {str(where)!r}. "
        f"Pass download=True to fetch it (needs torchvision and a network connection), "
        f"or put the files there yourself{extra}. The data folder is root=..., "
        "else $SKCCE_DATA, else ~/.cache/skcce/datasets."
    )


# ---------------------------------------------------------------------------- MNIST family

_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _find_idx(folder: Path, base: str) -> Path | None:
    for candidate in (folder / base, folder / (base + ".gz")):
        if candidate.is_file():
            return candidate
    return None


def _idx_folder(folders: list[Path], splits) -> Path | None:
    needed = [b for s in splits for b in _IDX_FILES[s]]
    for folder in folders:
        if all(_find_idx(folder, b) is not None for b in needed):
            return folder
    return None


def _load_idx_split(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    img_name, lab_name = _IDX_FILES[split]
    images = read_idx(_find_idx(folder, img_name))
    labels = read_idx(_find_idx(folder, lab_name))
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(
            f"Inconsistent IDX files in {str(folder)!r}: images {images.shape}, "
            f"labels {labels.shape} (expected (N, H, W) and (N,))"
        )
    return images, labels.astype(np.int64)


def _load_mnist_like(name, root: Path, splits, download):
    tv_name = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}[name]
    folders = [root / tv_name / "raw"]
    if name == "fashion-mnist":
        folders.append(Path(DEBIAN_FASHION_MNIST_DIR))
    folder = _idx_folder(folders, splits)
    if folder is None and download:
        datasets = _import_torchvision_datasets()
        cls = getattr(datasets, tv_name)
        for s in splits:
            cls(root=str(root), train=(s == "train"), download=True)
        folder = _idx_folder(folders[:1], splits)
    if folder is None:
        extra = (
            ", or install Debian's dataset-fashion-mnist package (files in "
            f"{DEBIAN_FASHION_MNIST_DIR})"
            if name == "fashion-mnist"
            else ""
        )
        files = [b + "[.gz]" for s in splits for b in _IDX_FILES[s]]
        return _missing(name, folders[0], files, extra)
    return [_load_idx_split(folder, s) for s in splits]


# ---------------------------------------------------------------------------- CIFAR

_CIFAR = {
    "cifar10": {
        "folder": "cifar-10-batches-py",
        "files": {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]},
        "tv": "CIFAR10",
    },
    "cifar100-20": {
        "folder": "cifar-100-python",
        "files": {"train": ["train"], "test": ["test"]},
        "tv": "CIFAR100",
    },
}


def _cifar_labels(name: str, d: dict, path: Path) -> np.ndarray:
    if name == "cifar10":
        labels = d.get("labels")
        n_classes = 10
    elif "coarse_labels" in d:
        labels = d["coarse_labels"]
        n_classes = 20
    elif "fine_labels" in d:
        fine = np.asarray(d["fine_labels"], dtype=np.int64)
        if fine.size and (fine.min() < 0 or fine.max() > 99):
            raise ValueError(f"Corrupt CIFAR-100 file {str(path)!r}: fine labels out of 0..99")
        labels = CIFAR100_COARSE_OF_FINE[fine]
        n_classes = 20
    else:
        labels = None
    if labels is None:
        raise ValueError(f"Corrupt CIFAR file {str(path)!r}: no labels found")
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    if labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        raise ValueError(f"Corrupt CIFAR file {str(path)!r}: labels out of 0..{n_classes - 1}")
    return labels


def _load_cifar_file(name: str, path: Path) -> tuple[np.ndarray, np.ndarray]:
    d = _load_pickle(path)
    if "data" not in d:
        raise ValueError(f"Corrupt CIFAR file {str(path)!r}: no 'data' entry")
    data = np.asarray(d["data"])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise ValueError(
            f"Corrupt CIFAR file {str(path)!r}: 'data' has dtype {data.dtype} and shape "
            f"{data.shape}, expected uint8 (N, 3072)"
        )
    labels = _cifar_labels(name, d, path)
    if len(labels) != len(data):
        raise ValueError(
            f"Corrupt CIFAR file {str(path)!r}: {len(data)} images but {len(labels)} labels"
        )
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def _load_cifar(name, root: Path, splits, download):
    spec = _CIFAR[name]
    folder = root / spec["folder"]
    needed = [f for s in splits for f in spec["files"][s]]
    if not all((folder / f).is_file() for f in needed) and download:
        datasets = _import_torchvision_datasets()
        getattr(datasets, spec["tv"])(root=str(root), train=True, download=True)
    missing = [f for f in needed if not (folder / f).is_file()]
    if missing:
        return _missing(name, folder, missing)
    out = []
    for s in splits:
        parts = [_load_cifar_file(name, folder / f) for f in spec["files"][s]]
        out.append((np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])))
    return out


# ---------------------------------------------------------------------------- STL-10

_STL_PIXELS = 3 * 96 * 96


def _load_stl_split(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    xp, yp = folder / f"{split}_X.bin", folder / f"{split}_y.bin"
    raw = np.fromfile(xp, dtype=np.uint8)
    labels = np.fromfile(yp, dtype=np.uint8).astype(np.int64)
    if raw.size % _STL_PIXELS:
        raise ValueError(
            f"Truncated STL-10 file {str(xp)!r}: {raw.size} bytes is not a multiple of one "
            f"96x96x3 image ({_STL_PIXELS} bytes)"
        )
    n = raw.size // _STL_PIXELS
    if n != len(labels):
        raise ValueError(
            f"Inconsistent STL-10 files in {str(folder)!r}: {n} images in {xp.name} but "
            f"{len(labels)} labels in {yp.name}"
        )
    if len(labels) and (labels.min() < 1 or labels.max() > 10):
        raise ValueError(f"Corrupt STL-10 labels in {str(yp)!r}: expected values 1..10")
    # stored per channel in column-major order: raw[n, c, col, row]
    images = raw.reshape(n, 3, 96, 96).transpose(0, 3, 2, 1)
    return np.ascontiguousarray(images), labels - 1


def _load_stl10(name, root: Path, splits, download):
    folder = root / "stl10_binary"
    needed = [f"{s}_{p}.bin" for s in splits for p in ("X", "y")]
    if not all((folder / f).is_file() for f in needed) and download:
        datasets = _import_torchvision_datasets()
        datasets.STL10(root=str(root), split="train", download=True)
    missing = [f for f in needed if not (folder / f).is_file()]
    if missing:
        return _missing(name, folder, missing)
    return [_load_stl_split(folder, s) for s in splits]


_LOADERS = {
    "mnist": _load_mnist_like,
    "fashion-mnist": _load_mnist_like,
    "cifar10": _load_cifar,
    "cifar100-20": _load_cifar,
    "stl10": _load_stl10,
}


def load_dataset(
    name: str,
    *,
    root: str | os.PathLike | None = None,
    split: str = "all",
    download: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Load one of the paper's datasets as numpy arrays.

    ===================  ===============  =========================  ==========================
    name                 images (N, ...)  classes                    files under ``root``
    ===================  ===============  =========================  ==========================
    ``"mnist"``          (N, 28, 28)      10 digits                  ``MNIST/raw/*-ubyte[.gz]``
    ``"fashion-mnist"``  (N, 28, 28)      10 garments                ``FashionMNIST/raw/...``
    ``"cifar10"``        (N, 32, 32, 3)   10                         ``cifar-10-batches-py/``
    ``"cifar100-20"``    (N, 32, 32, 3)   20 CIFAR-100 superclasses  ``cifar-100-python/``
    ``"stl10"``          (N, 96, 96, 3)   10                         ``stl10_binary/``
    ===================  ===============  =========================  ==========================

    Sizes (train + test): MNIST and Fashion-MNIST 60 000 + 10 000, CIFAR 50 000 + 10 000,
    STL-10 5 000 + 8 000 labelled images (the unlabelled split is not read).
    CIFAR-100-20 uses the coarse labels stored in the files (or, if a file has only fine
    labels, :data:`CIFAR100_COARSE_OF_FINE`). Fashion-MNIST is also found, without
    download, in Debian's package folder :data:`DEBIAN_FASHION_MNIST_DIR`.

    Parameters
    ----------
    name : {"mnist", "fashion-mnist", "cifar10", "cifar100-20", "stl10"}
        Dataset.
    root : str, os.PathLike or None, default=None
        Data folder (torchvision's layout); ``None``: :func:`get_data_home`, i.e.
        ``$SKCCE_DATA`` or ``~/.cache/skcce/datasets``.
    split : {"train", "test", "all"}, default="all"
        Which part; ``"all"`` is the training images followed by the test images.
    download : bool, default=False
        Fetch missing files with torchvision's dataset classes into ``root``.

    Returns
    -------
    X : numpy.ndarray of uint8, shape (N, H, W) or (N, H, W, 3)
        Images, grey or RGB (channels last).
    y : numpy.ndarray of int64, shape (N,)
        Class labels starting at 0.

    Raises
    ------
    ValueError
        Unknown name or split; corrupt, truncated or inconsistent files.
    FileNotFoundError
        Files missing and ``download=False``; the message says how to get them.

    Examples
    --------
    >>> import os, tempfile
    >>> from skcce.datasets import load_dataset
    >>> try:
    ...     load_dataset("cifar10", root=tempfile.mkdtemp())
    ... except FileNotFoundError as exc:
    ...     print("download=True" in str(exc))
    True
    >>> from skcce.datasets import DEBIAN_FASHION_MNIST_DIR
    >>> if os.path.isdir(DEBIAN_FASHION_MNIST_DIR):  # Debian's package: no download
    ...     X, y = load_dataset("fashion-mnist", split="test", root=tempfile.mkdtemp())
    ...     assert X.shape == (10000, 28, 28) and (X.dtype, y.dtype) == ("uint8", "int64")
    """
    key = str(name).lower()
    if key not in _LOADERS:
        raise ValueError(f"Unknown dataset {name!r}; known names are {list(DATASET_NAMES)}")
    if split not in _SPLITS:
        raise ValueError(f"split must be one of {list(_SPLITS)}, got {split!r}")
    splits = ("train", "test") if split == "all" else (split,)
    parts = _LOADERS[key](key, get_data_home(root), splits, download)
    if isinstance(parts, FileNotFoundError):
        raise parts
    if len(parts) == 1:
        return parts[0]
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    return X, y
