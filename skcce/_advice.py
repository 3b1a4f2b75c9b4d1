"""What a fit that ends with empty or near-empty clusters tells the user to change.

The advice is computed from the settings the fit resolved (``"auto"`` values replaced, the
kept restart's ``init``), so it never suggests what the fit already used, and it names the
restarts that ended the same way.

It speaks a *vocabulary*: by default the Python parameter names (``n_init=10``); a mapping
from parameter names to command-line flags (``{"n_init": "--n-init"}``) words it for a
command instead (``--n-init 10``) and leaves out the tips about parameters the command has no
flag for. The message is an :class:`Advice`, a ``str`` that can be reworded later
(:func:`reword`): a command line catches the estimator's warning and shows it in its own
words.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["Advice", "collapse_message", "reword"]


class Advice(str):
    """A message (a ``str``, in the vocabulary it was made with) that can be said again in
    another vocabulary.

    Pickled or copied with ``str()``, it is the plain text.

    Examples
    --------
    >>> advice = Advice(lambda vocabulary: "Try n_init=3" if vocabulary is None else "Try -n 3")
    >>> advice, advice.reworded({"n_init": "-n"})
    ('Try n_init=3', 'Try -n 3')
    """

    def __new__(cls, compose, vocabulary=None):
        self = super().__new__(cls, compose(vocabulary))
        self._compose = compose
        return self

    def reworded(self, vocabulary) -> str:
        """The same message in ``vocabulary`` (see :func:`collapse_message`)."""
        return self._compose(vocabulary)

    def __reduce__(self):
        return (str, (str(self),))


def reword(message, vocabulary) -> str:
    """The text of ``message`` (a str, or a warning's message) in ``vocabulary``: an
    :class:`Advice` is reworded, anything else is returned as ``str(message)``.

    Examples
    --------
    >>> reword(UserWarning("plain text"), {"n_init": "--n-init"})
    'plain text'
    """
    if isinstance(message, Warning) and len(message.args) == 1:
        message = message.args[0]
    if isinstance(message, Advice):
        return message.reworded(vocabulary)
    return str(message)


class _Words:
    """How one vocabulary names a parameter and one of its settings."""

    def __init__(self, vocabulary):
        self.vocabulary = vocabulary

    def has(self, *parameters):
        return self.vocabulary is None or all(p in self.vocabulary for p in parameters)

    def _flag(self, parameter):
        entry = self.vocabulary[parameter]
        return (entry, {}) if isinstance(entry, str) else entry

    def name(self, parameter):
        """``fairness_weight``, or the flag (``--lam``)."""
        return parameter if self.vocabulary is None else self._flag(parameter)[0]

    def setting(self, parameter, value):
        """``init='kmeans'``, or ``--init kmeans`` (a value's own word where the vocabulary
        gives one: ``{"prior": ("--prior", {None: "uniform"})}`` says ``--prior uniform``)."""
        if self.vocabulary is None:
            return f"{parameter}={value!r}"
        flag, values = self._flag(parameter)
        word = values.get(value, value) if isinstance(value, (str, int, type(None))) else value
        return f"{flag} {word}"


def _advice(linear: bool, used: dict, words: _Words) -> list[str]:
    """The changes worth trying, given the resolved settings ``used``, each in ``words``
    (a tip about a parameter the vocabulary lacks is left out)."""
    tips = []
    larger = [
        f"{words.name(p)} (this fit: {used[p]:g})"
        for p in ("fairness_weight", "lam")
        if words.has(p)
    ]
    if larger:
        tips.append(f"a larger {' or '.join(larger)}")
    if used["prior"] == "auto" and words.has("prior"):
        tips.append(f"{words.setting('prior', None)} (uniform cluster sizes), if the classes "
                    "are balanced")  # fmt: skip
    if words.has("learning_rate"):
        tips.append(f"a smaller {words.name('learning_rate')} (this fit: "
                    f"{used['learning_rate']:g})")  # fmt: skip
    if linear:
        if used["init"] != "kmeans" and words.has("init"):
            tips.append(words.setting("init", "kmeans"))
        if words.has("n_init"):
            tips.append(f"more restarts (this fit: {words.setting('n_init', used['n_init'])})")
    else:
        if used["optimizer"] != "adam" and words.has("optimizer"):
            tips.append(words.setting("optimizer", "adam"))
        if used["augment"] is None and words.has("augment"):
            tips.append(words.setting("augment", "default"))
        if words.has("batch_size"):
            tips.append(f"a larger {words.name('batch_size')} (this fit: "
                        f"{used['batch_size']})")  # fmt: skip
    if words.has("n_clusters"):
        tips.append(f"fewer clusters (this fit: {words.setting('n_clusters', used['n_clusters'])})")
    return tips


def collapse_message(empty, near_empty, restarts, linear, used, vocabulary=None) -> Advice:
    """The ConvergenceWarning of a fit whose kept restart has empty or near-empty clusters.

    Parameters
    ----------
    empty, near_empty : ndarray of int
        The kept restart's empty and near-empty clusters
        (:func:`skcce._engine._callbacks.small_clusters`).
    restarts : tuple (list of int, int)
        The restarts (1-based) that ended with an empty or near-empty cluster, and the
        number of completed restarts.
    linear : bool
        Whether the model is the linear head.
    used : dict
        The resolved settings: ``fairness_weight``, ``lam``, ``learning_rate``, ``init``
        ("random", "kmeans", "mixed" or "array"), ``n_init``, ``optimizer``, ``augment``,
        ``batch_size``, ``n_clusters``, ``prior`` ("uniform", "auto", "estimate" or
        "match") and ``near_empty`` (the near-empty fraction of ``n_samples / n_clusters``,
        default 0.01).
    vocabulary : dict, default=None
        How the advice names the settings. None: the estimator's parameters
        (``n_init=10``). A dict: ``{parameter: flag}`` or ``{parameter: (flag, {value:
        word})}`` for a command line (``--n-init 10``; ``{"prior": ("--prior", {None:
        "uniform"})}`` says ``--prior uniform`` for ``prior=None``); tips about a parameter
        missing from it are left out.

    Returns
    -------
    message : Advice
        A ``str``; :func:`reword` says it in another vocabulary.

    Examples
    --------
    >>> used = dict(fairness_weight=1.3, lam=100.0, learning_rate=0.5, init="random",
    ...             n_init=10, n_clusters=4, prior="uniform")
    >>> message = collapse_message([3], [], ([2], 10), True, used)
    >>> message[message.index("Try"):]
    "Try a larger fairness_weight (this fit: 1.3) or lam (this fit: 100); a smaller \
learning_rate (this fit: 0.5); init='kmeans'; more restarts (this fit: n_init=10); fewer \
clusters (this fit: n_clusters=4)"
    >>> flags = {"lam": "--lam", "n_init": "--n-init", "n_clusters": "-k"}
    >>> reworded = reword(message, flags)
    >>> reworded[reworded.index("Try"):]
    'Try a larger --lam (this fit: 100); more restarts (this fit: --n-init 10); fewer clusters \
(this fit: -k 4)'
    """
    compose = functools.partial(_compose, empty, near_empty, restarts, linear, dict(used))
    return Advice(compose, vocabulary)


def _compose(empty, near_empty, restarts, linear, used, vocabulary) -> str:
    collapsed, total = restarts
    k, parts = used["n_clusters"], []
    if len(empty):
        verb = "is" if len(empty) == 1 else "are"
        parts.append(f"{len(empty)} of {k} clusters {verb} empty after fit (clusters "
                     f"{np.asarray(empty).tolist()[:10]})")  # fmt: skip
    if len(near_empty):
        verb = "holds" if len(near_empty) == 1 else "hold"
        share = used.get("near_empty", 0.01)
        parts.append(
            f"{len(near_empty)} of {k} clusters {verb} fewer than {share:.0%} of "
            f"n_samples / n_clusters (clusters {np.asarray(near_empty).tolist()[:10]})"
        )
    if total == 1:
        which = "the only restart ended with an empty or near-empty cluster"
    elif len(collapsed) == total:
        which = f"every one of the {total} restarts ended with an empty or near-empty cluster"
    else:
        which = (
            f"restarts {collapsed[:10]} of {total} (1-based) ended with an empty or near-empty "
            "cluster, and no other restart agreed better with the rest"
        )
    tips = _advice(linear, used, _Words(vocabulary))
    advice = f". Try {'; '.join(tips)}" if tips else ""
    return f"{'; '.join(parts)}: {which}{advice}"
