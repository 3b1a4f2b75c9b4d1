"""What the sub-commands share: one-line errors, their exit statuses, argument parsers and the
check of an output path."""

from __future__ import annotations

import argparse
import os
import sys

from skcce._engine._io import one_line

__all__ = [
    "CommandError",
    "check_output",
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
