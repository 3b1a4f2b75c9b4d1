"""Atomic file writes (nothing half-written is ever left at the target path) and one-line
messages."""

from __future__ import annotations

import os
import tempfile


def atomic_write(path, write, *, binary: bool = False, publish=os.replace) -> None:
    """Write a file atomically: ``write(handle)`` fills a temporary file, which replaces ``path``.

    The temporary file lives in the folder of ``path`` (so :func:`os.replace` is a rename on
    one file system), gets the usual permissions (``0o666`` less the umask; ``mkstemp``
    creates ``0o600``), is flushed and fsynced before the rename, and the folder is fsynced
    after it, so a crash at any moment leaves the old file or the new one. On any error the
    temporary file is removed and the error propagates.

    Parameters
    ----------
    path : str or os.PathLike
        Target file.
    write : callable
        ``write(handle)`` writes the content to an open file object.
    binary : bool, default=False
        Open the temporary file in binary mode (else UTF-8 text, ``newline=""``).
    publish : callable, default=os.replace
        ``publish(tmp, path)`` gives the complete temporary file its name (the CLI's
        no-overwrite writes pass one that refuses an existing ``path``).

    Examples
    --------
    >>> import os, tempfile
    >>> from skcce._engine._io import atomic_write
    >>> target = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> atomic_write(target, lambda fh: fh.write("done\\n"))
    >>> open(target).read()
    'done\\n'
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".skcce-", suffix=".tmp")
    try:
        mask = os.umask(0o022)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        kwargs = {} if binary else {"encoding": "utf-8", "newline": ""}
        with os.fdopen(fd, "wb" if binary else "w", **kwargs) as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        publish(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    if os.path.exists(tmp):  # published by a hard link: the temporary name goes
        os.remove(tmp)
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` as one line (white space folded), cut to ``limit`` characters with "...".

    Examples
    --------
    >>> from skcce._engine._io import one_line
    >>> one_line("no such\\n  file", limit=10)
    'no such...'
    """
    text = " ".join(str(text).split())
    if limit is None or len(text) <= limit:
        return text
    return text[: limit - 3] + "..."
