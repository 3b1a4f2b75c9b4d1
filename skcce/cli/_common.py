"""What the sub-commands share: one-line errors, their exit statuses, argument parsers, the
check of an output path and the writing of a file that must not replace another."""

from __future__ import annotations

import argparse
import os
import sys

from skcce._engine._io import atomic_write, one_line

__all__ = [
    "CommandError",
    "OutputExistsError",
    "check_output",
    "refuse_existing",
    "write_file",
    "n_clusters_arg",
    "non_negative_int",
    "one_line",
    "positive_int",
]


class CommandError(Exception):
    """An error reported to the user as one line, without a traceback."""


def run_command(name, action) -> int:
    """Run ``action()`` for the sub-command ``name``; return its exit status.

    0 on success; 1 on a :class:`CommandError` or an expected failure (bad input, a missing
    file, a missing dependency, no memory), reported as one line on stderr without a
    traceback; 130 when interrupted (Ctrl-C).
    """
    try:
        action()
    except CommandError as exc:
        print(f"{name}: error: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError, RuntimeError, ImportError, MemoryError) as exc:
        print(f"{name}: error: {one_line(str(exc)) or type(exc).__name__}", file=sys.stderr)
        return 1
    return 0


def _int_at_least(minimum, words):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected {words}, got {text!r}") from None
        return value

    return parse


#: argparse ``type=`` of an integer >= 1 (a usage error otherwise)
positive_int = _int_at_least(1, "a positive integer")
#: argparse ``type=`` of an integer >= 0
non_negative_int = _int_at_least(0, "an integer >= 0")


def n_clusters_arg(text):
    """argparse ``type=`` of ``--n-clusters``: a positive integer, or ``"auto"`` (any case).

    Parameters
    ----------
    text : str
        The command-line value.

    Returns
    -------
    n_clusters : int or str
        The integer, or the string ``"auto"``.

    Raises
    ------
    argparse.ArgumentTypeError
        Neither (argparse reports it as a usage error).

    Examples
    --------
    >>> n_clusters_arg("12"), n_clusters_arg("Auto")
    (12, 'auto')
    """
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or 'auto', got {text!r}"
        ) from None
    return value


def check_output(out):
    """Raise :class:`CommandError` unless ``out`` ("-" = stdout) can be written as a file."""
    if out == "-":
        return
    folder = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        raise CommandError(f"--out {out!r} is a folder; give a file name such as labels.csv")
    if not os.path.isdir(folder):
        raise CommandError(f"cannot write {out!r}: folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CommandError(f"cannot write {out!r}: folder {folder!r} is not writable")


class OutputExistsError(FileExistsError):
    """An output file is there already and ``--force`` was not given (exit status 1, like
    every other error about an output path)."""


def refuse_existing(paths, option):
    """Raise :class:`OutputExistsError` when any of ``paths`` exists, naming the first.

    Parameters
    ----------
    paths : sequence of str
        The files a command is about to write, in the order it writes them.
    option : str
        The option that chose them (``"--out"``, ``"--report"``): the message says to pass
        ``--force`` or another value of it.

    Examples
    --------
    >>> import os, tempfile
    >>> there = os.path.join(tempfile.mkdtemp(), "labels.csv")
    >>> refuse_existing([there], "--out")  # nothing there yet: no error
    >>> open(there, "w").close()
    >>> try:
    ...     refuse_existing([there], "--out")
    ... except OutputExistsError as exc:
    ...     print(str(exc).replace(there, "labels.csv"))
    'labels.csv' already exists; pass --force to overwrite it, or another --out
    """
    found = [path for path in paths if os.path.lexists(path)]
    if not found:
        return
    more = len(found) - 1
    others = f" (and {more} other file{'s' if more > 1 else ''} it would write)" if more else ""
    verb = "exist" if more else "exists"
    raise OutputExistsError(
        f"{found[0]!r}{others} already {verb}; pass --force to overwrite "
        f"{'them' if more else 'it'}, or another {option}"
    )


def write_file(path, write, *, binary=False, force=False, option="--out"):
    """Write ``path`` atomically; without ``force`` never replace a file that is there at the
    moment of writing.

    ``write(handle)`` fills a temporary file in the same folder. With ``force`` it replaces
    ``path`` (:func:`skcce._engine._io.atomic_write`). Without, it is hard-linked to ``path``,
    which fails when ``path`` exists (checked and created in one step by the file system, so a
    file that appeared since the command started is not overwritten either); on a file system
    without hard links, ``path`` is created exclusively and then replaced by the temporary
    file. Either way nothing is left at ``path`` on an error, and the temporary file is
    removed.

    Parameters
    ----------
    path : str or path-like
    write : callable
        ``write(handle)`` writes the content to an open file object.
    binary : bool, default=False
        Binary mode (else UTF-8 text, ``newline=""``).
    force : bool, default=False
        Replace an existing ``path``.
    option : str, default="--out"
        Named in the error (see :func:`refuse_existing`).

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``force`` is False.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> write_file(path, lambda handle: handle.write("first"))
    >>> try:
    ...     write_file(path, lambda handle: handle.write("second"))
    ... except OutputExistsError:
    ...     print(open(path).read())
    first
    >>> write_file(path, lambda handle: handle.write("second"), force=True)
    >>> open(path).read()
    'second'
    """
    path = os.fspath(path)
    if force:
        atomic_write(path, write, binary=binary)
        return
    refuse_existing([path], option)
    atomic_write(
        path, write, binary=binary, publish=lambda tmp, target: _link_new(tmp, target, option)
    )


def _link_new(tmp, path, option):
    """Give the complete file ``tmp`` the name ``path``, which must not exist."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        refuse_existing([path], option)
        raise
    except OSError:  # no hard links here (some network and FAT file systems)
        pass
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))  # the name is ours now
    except FileExistsError:
        refuse_existing([path], option)
        raise
    try:
        os.replace(tmp, path)
    except BaseException:
        os.remove(path)  # the empty file just created, not anyone's data
        raise
