"""Read a file of precomputed features (embeddings) for ``skcce cluster``.

Users who already have image embeddings (CLIP, DINOv2, ...) cluster them with
``skcce cluster embeddings.npy -k 20``. One job here: turn a features file into an
``(n_samples, n_features)`` array and, when the file has them, one id per row.

========== ==================================================================================
extension  how it is read
========== ==================================================================================
``.npy``   memory-mapped (``numpy.load(mmap_mode="r")``): the array is never loaded whole
``.npz``   the array named by ``--array`` (needed when the file holds several); its ids from
           the 1-D array named by ``--id-column``, if given
``.csv``   pandas (``pip install skcce[tables]``); numeric columns are the features, one
           non-numeric column (or ``--id-column``) the ids
``.parquet`` pandas + pyarrow (``pip install skcce[tables]``); numeric columns, or one column
           of equal-length lists (the usual way embeddings are stored in Parquet)
========== ==================================================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

__all__ = ["FEATURE_EXTENSIONS", "FeaturesFile", "read_features"]

#: File extensions (lower case) read as features files.
FEATURE_EXTENSIONS = (".npy", ".npz", ".csv", ".parquet")

_TABLES_EXTRA = "pip install skcce[tables]"


@dataclass
class FeaturesFile:
    """A features file, read.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features)
        The features (a read-only ``numpy.memmap`` for ``.npy`` files).
    ids : ndarray of shape (n_samples,) or None
        One id per row, or ``None`` when the file has none (rows are then named by index).
    id_name : str
        The CSV column header for the ids: the id column's name, or ``"index"``.
    """

    X: np.ndarray
    ids: np.ndarray | None
    id_name: str

    def row_ids(self):
        """The ids, or the row indices ``0 .. n_samples - 1`` when the file has none.

        Returns
        -------
        ids : ndarray of shape (n_samples,)

        Examples
        --------
        >>> import numpy as np
        >>> from skcce.cli._features_file import FeaturesFile
        >>> FeaturesFile(np.zeros((3, 2)), None, "index").row_ids().tolist()
        [0, 1, 2]
        """
        return np.arange(len(self.X)) if self.ids is None else self.ids


def read_features(path, *, array=None, id_column=None):
    """Read a ``.npy``, ``.npz``, ``.csv`` or ``.parquet`` file of features.

    Parameters
    ----------
    path : str or path-like
        The file; its extension (any case) picks the reader.
    array : str, default=None
        ``.npz`` only: the name of the features array (required when the file holds more than
        one array).
    id_column : str, default=None
        The ids: a column of a ``.csv``/``.parquet`` file or a 1-D array of a ``.npz`` file.
        Without it a table's single non-numeric column, if any, gives the ids.

    Returns
    -------
    features : FeaturesFile

    Raises
    ------
    ValueError
        An unsupported extension, a missing array or column, features that are not a 2-D
        numeric table, or ids that do not match the rows.
    ImportError
        A ``.csv``/``.parquet`` file without pandas (and pyarrow): the message names the extra.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from skcce.cli._features_file import read_features
    >>> path = os.path.join(tempfile.mkdtemp(), "emb.npy")
    >>> np.save(path, np.ones((4, 3), dtype=np.float32))
    >>> f = read_features(path)
    >>> f.X.shape, type(f.X).__name__, f.id_name
    ((4, 3), 'memmap', 'index')
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in FEATURE_EXTENSIONS:
        raise ValueError(
            f"unsupported features file type {ext or '(no extension)'!r} for {path!r}: expected "
            f"{', '.join(FEATURE_EXTENSIONS)}, or a folder of images"
        )
    if array is not None and ext != ".npz":
        raise ValueError(f"--array names an array of a .npz file; {path!r} is a {ext} file")
    if id_column is not None and ext == ".npy":
        raise ValueError(
            "a .npy file holds no ids; store them beside the features in a .npz file "
            "(--array, --id-column) or a table (.csv, .parquet)"
        )
    if ext == ".npy":
        X, ids, id_name = np.load(path, mmap_mode="r", allow_pickle=False), None, "index"
    elif ext == ".npz":
        X, ids, id_name = _read_npz(path, array, id_column)
    else:
        X, ids, id_name = _read_table(path, ext, id_column)
    _check_features(X, path)
    if ids is not None and len(ids) != len(X):
        raise ValueError(
            f"{path!r}: {len(ids)} ids for {len(X)} rows of features; they must match one to one"
        )
    return FeaturesFile(X, ids, id_name)


def _check_features(X, path):
    if X.dtype.kind not in "fiu":
        raise ValueError(f"{path!r}: features must be numbers; got dtype {X.dtype}")
    if X.ndim != 2:
        raise ValueError(
            f"{path!r}: features must be a 2-D array (n_samples, n_features); "
            f"got shape {tuple(X.shape)}"
        )
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{path!r} holds no features (shape {tuple(X.shape)})")


def _read_npz(path, array, id_column):
    with np.load(path, allow_pickle=False) as archive:
        names = list(archive.files)
        listed = ", ".join(repr(n) for n in names) or "none"
        if array is None:
            candidates = [n for n in names if n != id_column]
            if len(candidates) != 1:
                raise ValueError(
                    f"{path!r} holds {len(candidates)} arrays ({listed}); choose the features "
                    "with --array NAME"
                )
            array = candidates[0]
        for name, flag in ((array, "--array"), (id_column, "--id-column")):
            if name is not None and name not in names:
                raise ValueError(f"{path!r} has no array {name!r} ({flag}); it holds {listed}")
        X = archive[array]
        ids = None
        if id_column is not None:
            ids = archive[id_column]
            if ids.ndim != 1:
                raise ValueError(
                    f"{path!r}: the ids array {id_column!r} must be 1-D; "
                    f"got shape {tuple(ids.shape)}"
                )
    return X, ids, id_column or "index"


def _import_pandas(ext):
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(
            f"reading {ext} features needs pandas{' and pyarrow' if ext == '.parquet' else ''}: "
            f"`{_TABLES_EXTRA}` (or save the features with numpy.save as .npy)"
        ) from None
    return pd


def _read_table(path, ext, id_column):
    pd = _import_pandas(ext)
    if ext == ".csv":
        frame = pd.read_csv(path)
    else:
        try:
            frame = pd.read_parquet(path)
        except ImportError as exc:
            raise ImportError(
                f"reading .parquet features needs pyarrow: `{_TABLES_EXTRA}` ({exc})"
            ) from None
    columns = [str(c) for c in frame.columns]
    frame.columns = columns
    if id_column is not None and id_column not in columns:
        raise ValueError(
            f"{path!r} has no column {id_column!r} (--id-column); its columns are "
            f"{', '.join(columns[:10])}{', ...' if len(columns) > 10 else ''}"
        )
    numeric = [c for c in columns if c != id_column and frame[c].dtype.kind in "fiub"]
    other = [c for c in columns if c != id_column and c not in numeric]
    if id_column is None and len(other) == 1 and numeric:
        id_column, other = other[0], []
    ids = frame[id_column].to_numpy() if id_column is not None else None
    if not numeric and len(other) == 1:
        return _stack_lists(frame[other[0]], path, other[0]), ids, id_column or "index"
    if other:
        raise ValueError(
            f"{path!r}: columns {', '.join(repr(c) for c in other[:5])} are not numeric; name "
            "the one that holds ids with --id-column, and remove the others"
        )
    return frame[numeric].to_numpy(), ids, id_column or "index"


def _stack_lists(column, path, name):
    """One column of equal-length lists or arrays -> a 2-D array."""
    values = column.to_list()
    if values and all(isinstance(v, (list, tuple, np.ndarray)) for v in values):
        lengths = {len(v) for v in values}
        if len(lengths) == 1:
            return np.asarray(np.stack([np.asarray(v) for v in values]))
    raise ValueError(
        f"{path!r}: column {name!r} is neither numeric nor a column of equal-length vectors"
    )
