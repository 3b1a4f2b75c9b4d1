"""Warnings that point at the user's line, however deep in skcce and scikit-learn they arise.

A fixed ``stacklevel`` counts frames, and the frames between a user's ``fit`` call and the
code that warns differ: scikit-learn's ``_fit_context`` and callback wrappers (``sklearn >=
1.9`` adds one around ``fit``), a ``Pipeline`` or ``GridSearchCV`` around the estimator, and
the engine's own layers. :func:`warn` instead attributes the warning to the first frame, going
outwards, that lies in none of skcce, scikit-learn and joblib (which runs a search's fits):
the line that called into them.
"""

from __future__ import annotations

import os
import sys
import warnings

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


def warn(message, category=UserWarning):
    """``warnings.warn(message, category)`` attributed to the user's line (see the module).

    Parameters
    ----------
    message : str
    category : type of Warning, default=UserWarning
    """
    warnings.warn(message, category, stacklevel=caller_stacklevel())
