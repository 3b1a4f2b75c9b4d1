"""When a restart's training ends before ``max_epochs``: its labels have stopped settling.

Each epoch's history entry counts the rows whose cluster changed since the epoch before
(``"changed"``, :mod:`skcce._engine._label_change`). Early on, that count falls as the
clusters settle; once it stops falling, what is left is the flicker of boundary rows under
stochastic steps, and more epochs reshuffle those rows without moving the partition
(docs/design/026-epoch-stop.md). The rule follows scikit-learn's ``n_iter_no_change``
(``SGDClassifier``, ``MLPClassifier``): training ends after ``n_iter_no_change`` epochs in a
row that change no fewer rows than the fewest of the epochs before them, or after an epoch
that changes none. Epochs that began by re-seeding lost clusters
(:mod:`skcce._engine._relocate`) moved rows on purpose: they are not counted, and the count
starts again after them.
"""

from __future__ import annotations


def stop_now(history: list, n_iter_no_change: int | None) -> bool:
    """Whether training ends after the last epoch of ``history`` (never when
    ``n_iter_no_change`` is None).

    Examples
    --------
    >>> entry = lambda changed, relocated=0: {"changed": changed, "relocated": relocated}
    >>> stop_now([entry(None), entry(40), entry(30)], 1)
    False
    >>> stop_now([entry(None), entry(40), entry(30), entry(31)], 1)
    True
    >>> stop_now([entry(None), entry(40), entry(30), entry(31)], 2)
    False
    >>> stop_now([entry(None), entry(40), entry(30), entry(31), entry(35)], 2)
    True
    >>> stop_now([entry(None), entry(0)], 1)
    True
    >>> stop_now([entry(None), entry(40), entry(50, relocated=3), entry(45)], 1)
    False
    >>> stop_now([entry(None), entry(40), entry(30)], None)
    False
    """
    if n_iter_no_change is None or not history:
        return False
    counts = []  # the changes of the epochs since the last re-seeding
    for entry in history:
        if entry.get("relocated", 0):
            counts = []
        elif entry.get("changed") is not None:
            counts.append(entry["changed"])
    last = history[-1]
    if last.get("relocated", 0) or last.get("changed") is None:
        return False
    if last["changed"] == 0:
        return True
    if len(counts) <= n_iter_no_change:
        return False
    fewest = min(counts[:-n_iter_no_change])
    return all(count >= fewest for count in counts[-n_iter_no_change:])
