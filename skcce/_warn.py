"""Warnings that point at the user's line, however deep in skcce and scikit-learn they arise.

A fixed ``stacklevel`` counts frames, and the frames between a user's ``fit`` call and the
code that warns differ: scikit-learn's ``_fit_context`` and callback wrappers (``sklearn >=
1.9`` adds one around ``fit``), a ``Pipeline`` or ``GridSearchCV`` around the estimator, and
the engine's own layers. :func:`warn` instead attributes the warning to the first frame, going
outwards, that lies in none of skcce, scikit-learn and joblib (which runs a search's fits):
the line that called into them.

:func:`collected` diverts the warnings that :func:`warn` raises in one thread into a list, so
that work run on several threads at once (the candidates of ``n_clusters="auto"``) can keep
each one's warnings apart (``warnings.catch_warnings`` changes process-wide state and is not
thread-safe).
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from contextlib import contextmanager

import joblib
import sklearn

#: Folders whose frames are never the user's code (joblib runs GridSearchCV's fits).
_INTERNAL = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    for module in (sys.modules[__package__], sklearn, joblib)
)


def caller_stacklevel() -> int:
    """The ``stacklevel`` (for a ``warnings.warn`` call in the caller of this function) of
    the innermost frame outside skcce and scikit-learn (the outermost frame when every frame
    is inside them).

    Examples
    --------
    >>> caller_stacklevel() >= 1
    True
    """
    frame = sys._getframe(1)  # the function that warns: level 1 of its warnings.warn
    level = 1
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_INTERNAL):
            return level
        if frame.f_back is None:
            return level
        frame = frame.f_back
        level += 1
    return level


_local = threading.local()


@contextmanager
def collected():
    """Within the block, :func:`warn` in this thread appends ``(message, category)`` to the
    yielded list instead of warning (other threads, and other code's warnings, are not
    affected).

    Examples
    --------
    >>> with collected() as caught:
    ...     warn("held back")
    >>> caught
    [('held back', <class 'UserWarning'>)]
    """
    sink, outer = [], getattr(_local, "sink", None)
    _local.sink = sink
    try:
        yield sink
    finally:
        _local.sink = outer


def warn(message, category=UserWarning):
    """``warnings.warn(message, category)`` attributed to the user's line (see the module),
    or held back by :func:`collected`.

    Parameters
    ----------
    message : str
    category : type of Warning, default=UserWarning
    """
    sink = getattr(_local, "sink", None)
    if sink is not None:
        sink.append((message, category))
        return
    warnings.warn(message, category, stacklevel=caller_stacklevel())
