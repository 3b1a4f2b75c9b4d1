"""A static HTML report of a clustering: ``skcce cluster ... --report DIR``.

One job: write ``DIR/index.html`` (and the files it shows) so that a user can *look* at the
clusters. The page opens from disk in any browser: no server, no script, no internet asset
(styles are inline, every image is a file beside the page).

* Images (:func:`write_image_report`): for every cluster, largest first, its size, its mean
  confidence (the mean over its members of the largest predicted probability) and two grids
  of thumbnails, its most confident and its least confident members.
* Features (:func:`write_features_report`): a 2-D map of the features coloured by cluster
  (PCA, or UMAP when ``umap-learn`` is installed) and the clusters' sizes and mean confidence
  as PNG figures (matplotlib, drawn without pyplot so the user's backend is left alone), then
  the same per-cluster sections listing the most and least confident rows, each entry
  labelled in words ("row 257, confidence 0.982"; "id cat_12 (row 257), confidence 0.982"
  for a file with an id column), so a row index is never mistaken for a rank. No
  ``thumbs/`` folder is written for a features file.
* ``-k auto`` (both reports, given ``n_clusters_scores``): which K was chosen, the curve of
  the criterion against K with the chosen K marked (``n_clusters.png``; for the image report
  only when matplotlib is installed) and the same numbers in a table.
* The fit's warnings (both reports, given ``warnings``), in a box under the title.

A report never replaces the files of an earlier one (:func:`existing_report_files`) unless
given ``force=True`` (``skcce cluster --force``); every file is written whole or not at all
(:func:`skcce.cli._common.write_file`).
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ClusterSummary",
    "existing_report_files",
    "summarize_clusters",
    "write_features_report",
    "write_image_report",
]

#: Members shown per grid (most confident, least confident).
N_SHOW = 8
#: Largest side of a thumbnail, in pixels.
THUMB_SIZE = 128
#: Most points drawn on the 2-D map (a random subset of larger inputs).
MAP_POINTS = 20_000

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; background: #fafafa; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin: 0 0 .3em 0; }
h3 { font-size: .95em; margin: .6em 0 .3em 0; color: #555; font-weight: normal; }
table.summary { border-collapse: collapse; margin-bottom: 1.5em; }
table.summary td, table.summary th { border: 1px solid #ccc; padding: .2em .6em;
                                     text-align: right; }
section.cluster { background: #fff; border: 1px solid #ddd; border-radius: 6px;
                  padding: .8em 1em; margin-bottom: 1.2em; }
.grid { display: flex; flex-wrap: wrap; gap: 6px; }
figure { margin: 0; width: THUMBpx; text-align: center; }
figure img { max-width: THUMBpx; max-height: THUMBpx; display: block; margin: 0 auto; }
figcaption { font-size: .7em; color: #555; overflow-wrap: anywhere; }
img.plot { max-width: 100%; border: 1px solid #ddd; background: #fff; margin: .5em 0; }
ul.ids { font-size: .85em; columns: 3; }
table.summary tr.chosen td { font-weight: bold; background: #e8eefc; }
section.warnings { background: #fff4e0; border: 2px solid #e0a030; border-radius: 6px;
                   padding: .6em 1em; margin-bottom: 1.2em; }
section.warnings li { margin: .3em 0; }
""".replace("THUMB", str(THUMB_SIZE))


@dataclass
class ClusterSummary:
    """One cluster's numbers for the report.

    Attributes
    ----------
    cluster : int
        The cluster label.
    size : int
        Its number of members.
    mean_confidence : float
        The mean of its members' confidence (NaN for an empty cluster).
    most : ndarray of int
        Row indices of its most confident members, most confident first (at most half the
        cluster, so that a small cluster shows both ends).
    least : ndarray of int
        Row indices of its least confident members (not among ``most``), least confident last.
    """

    cluster: int
    size: int
    mean_confidence: float
    most: np.ndarray
    least: np.ndarray


def summarize_clusters(labels, confidence, n_clusters, n_show=N_SHOW):
    """Per-cluster size, mean confidence and most/least confident members, largest first.

    Parameters
    ----------
    labels : array-like of shape (n_samples,)
        Cluster labels in ``0 .. n_clusters - 1``.
    confidence : array-like of shape (n_samples,)
        Each sample's largest predicted cluster probability.
    n_clusters : int
        K; clusters without members are listed too (size 0).
    n_show : int, default=N_SHOW
        Members in each of the two lists.

    Returns
    -------
    summaries : list of ClusterSummary
        Ordered by size, largest first (ties by label).

    Examples
    --------
    >>> from skcce.cli._report import summarize_clusters
    >>> s = summarize_clusters([1, 1, 0, 1], [0.9, 0.5, 0.8, 0.7], 3, n_show=1)
    >>> [(c.cluster, c.size, c.most.tolist(), c.least.tolist()) for c in s]
    [(1, 3, [0], [1]), (0, 1, [2], []), (2, 0, [], [])]
    """
    labels = np.asarray(labels)
    confidence = np.asarray(confidence, dtype=float)
    summaries = []
    for k in range(n_clusters):
        members = np.flatnonzero(labels == k)
        order = members[np.argsort(-confidence[members], kind="stable")]
        most = order[: min(n_show, (len(order) + 1) // 2)]  # small clusters: half and half
        least = order[len(most) :][-n_show:]
        mean = float(confidence[members].mean()) if len(members) else float("nan")
        summaries.append(ClusterSummary(k, len(members), mean, most, least))
    summaries.sort(key=lambda s: (-s.size, s.cluster))
    return summaries


#: The files of a report in its folder (``thumbs/`` holds the image report's ``*.jpg``).
REPORT_FILES = ("index.html", "map.png", "clusters.png", "n_clusters.png", "thumbs")


def existing_report_files(out_dir):
    """The files in ``out_dir`` that writing a report there would replace or remove: those of
    :data:`REPORT_FILES` that exist and the ``*.jpg`` files in ``thumbs/`` (an empty
    ``thumbs/`` folder does not count).

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> existing_report_files(folder), existing_report_files(os.path.join(folder, "new"))
    ([], [])
    >>> open(os.path.join(folder, "index.html"), "w").close()
    >>> [os.path.basename(p) for p in existing_report_files(folder)]
    ['index.html']
    """
    out_dir = os.fspath(out_dir)
    found = []
    for name in REPORT_FILES:
        path = os.path.join(out_dir, name)
        if name != "thumbs":
            found += [path] if os.path.lexists(path) else []
        elif os.path.isdir(path):
            found += sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith(".jpg"))
    return found


def _save(path, write, *, binary=True, force=False):
    from skcce.cli._common import write_file

    write_file(path, write, binary=binary, force=force, option="--report")


def _prepare(out_dir, thumbs, force):
    """Create ``out_dir`` (its parent must exist), and an empty ``out_dir/thumbs`` when
    ``thumbs`` (the image report; a features report has no thumbnails). Without ``force``,
    an :class:`~skcce.cli._common.OutputExistsError` when an earlier report is there."""
    from skcce.cli._common import refuse_existing

    out_dir = os.fspath(out_dir)
    parent = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.isdir(parent):
        raise ValueError(f"cannot write the report in {out_dir!r}: {parent!r} does not exist")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ValueError(f"the report goes in a folder; {out_dir!r} is a file")
    if not force:
        refuse_existing(existing_report_files(out_dir), "--report")
    os.makedirs(out_dir, exist_ok=True)
    if not thumbs:
        return out_dir
    os.makedirs(os.path.join(out_dir, "thumbs"), exist_ok=True)
    for name in os.listdir(os.path.join(out_dir, "thumbs")):  # ours, from an earlier report
        if name.endswith(".jpg"):
            os.remove(os.path.join(out_dir, "thumbs", name))
    return out_dir


def _warnings_section(messages):
    """A box listing ``messages`` (the fit's warnings); ``""`` when there are none."""
    if not messages:
        return ""
    items = "".join(f"<li>{html.escape(str(m))}</li>" for m in messages)
    return (
        '<section class="warnings" role="alert"><h2>Warnings</h2><p>The fit warned (the same '
        f"lines were printed by the command):</p><ul>{items}</ul></section>\n"
    )


def _page(title, intro, summaries, body_of, extra="", warnings=()):
    esc = html.escape
    rows = "".join(
        f'<tr><td><a href="#cluster-{s.cluster}">{s.cluster}</a></td><td>{s.size}</td>'
        f"<td>{_fmt(s.mean_confidence)}</td></tr>"
        for s in summaries
    )
    sections = "".join(
        f'<section class="cluster" id="cluster-{s.cluster}" data-cluster="{s.cluster}">'
        f"<h2>Cluster {s.cluster}: {s.size} member{'s' if s.size != 1 else ''}, mean confidence "
        f"{_fmt(s.mean_confidence)}</h2>{body_of(s) if s.size else '<p>empty</p>'}</section>\n"
        for s in summaries
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>\n"
        f"<h1>{esc(title)}</h1>\n{_warnings_section(warnings)}<p>{intro}</p>{extra}\n"
        '<table class="summary"><tr><th>cluster</th><th>size</th><th>mean confidence</th></tr>'
        f"{rows}</table>\n{sections}</body></html>\n"
    )


def _matplotlib():
    """``(FigureCanvasAgg, Figure)``: figures drawn without pyplot (the user's backend is left
    alone); an ImportError that names the extra when matplotlib is missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(
            "the report of a features file draws its figures with matplotlib: "
            "`pip install skcce[report]`"
        ) from None
    return FigureCanvasAgg, Figure


#: The file of the ``-k auto`` curve in the report folder.
CURVE_FILE = "n_clusters.png"


def _curve_figure(path, scores, chosen, force):
    """Draw the criterion against K (``scores``: {K: criterion}) with ``chosen`` marked."""
    FigureCanvasAgg, Figure = _matplotlib()
    ks = sorted(scores)
    fig = Figure(figsize=(6, 3.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(ks, [scores[k] for k in ks], marker="o", color="C0", label="criterion")
    if chosen in scores:
        ax.plot(
            [chosen], [scores[chosen]], marker="*", markersize=18, linestyle="none",
            color="C3", label=f"chosen: K = {chosen}", clip_on=False, zorder=3,
        )  # fmt: skip
    else:  # K = 1 is never fitted: chosen when no K of the range shows structure
        ax.axvline(chosen, color="C3", linestyle="--", label=f"chosen: K = {chosen}")
    shown = sorted({*ks, chosen})
    if len(shown) <= 30:
        ax.set_xticks(shown)
    ax.set_ylim(0, max(1.05, 1.05 * max(scores.values())))
    ax.set_xlabel("number of clusters K")
    ax.set_ylabel("criterion (higher is better)")
    ax.set_title("-k auto: the criterion of every K tried")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    _save(path, lambda handle: fig.savefig(handle, format="png"), force=force)


def _n_clusters_section(out_dir, scores, chosen, *, need_figure, restarts=None, force=False):
    """HTML saying which K ``-k auto`` chose, with the curve (``n_clusters.png``) and a table
    of ``scores``; ``""`` for an integer K (``scores`` None). Without matplotlib the figure is
    left out unless ``need_figure`` (then the ImportError propagates). ``restarts``
    (``{K: restarts}``) marks the K left at the screening pass."""
    path = os.path.join(out_dir, CURVE_FILE)
    if scores is None:
        if os.path.exists(path):  # ours, from an earlier -k auto report in this folder
            os.remove(path)
        return ""
    scores = {int(k): float(v) for k, v in scores.items()}
    try:
        _curve_figure(path, scores, chosen, force)
        figure = (
            f'<img class="plot curve" src="{CURVE_FILE}" '
            f'alt="criterion against the number of clusters; K = {chosen} chosen">'
        )
    except ImportError:
        if need_figure:
            raise
        figure = "<p>(the curve is drawn with matplotlib: pip install skcce[report])</p>"
    tried = f"{min(scores)} to {max(scores)}" if scores else "none"
    if chosen in scores:
        why = "the K with the highest criterion"
    else:
        why = "no K of the range had a criterion high enough to show cluster structure"
    restarts = {int(k): int(v) for k, v in (restarts or {}).items()}
    most = max(restarts.values(), default=0)

    def note(k):
        if k == chosen:
            return "chosen"
        if restarts.get(k, most) < most:
            return f"screening only ({restarts[k]} restarts)"
        return ""

    chosen_row = ' class="chosen"'
    rows = "".join(
        f"<tr{chosen_row if k == chosen else ''}><td>{k}</td><td>{v:.3f}</td>"
        f"<td>{note(k)}</td></tr>"
        for k, v in sorted(scores.items())
    )
    return (
        f'<section class="n-clusters"><h2>Number of clusters: K = {chosen}, chosen from the '
        f"data (-k auto)</h2><p>K = {chosen}: {why}, among K = {tried}. The criterion is "
        "computed for every K tried: the agreement of the restarts times the crispness of the "
        "kept clustering (its label-free mutual information over (log K)^0.7), 0 where the "
        "fit at K emptied a cluster. To overrule the choice, run again with -k K.</p>"
        f"{figure}"
        '<table class="summary n-clusters"><tr><th>K</th><th>criterion</th><th></th></tr>'
        f"{rows}</table></section>\n"
    )


def _fmt(value):
    return "-" if not np.isfinite(value) else f"{value:.3f}"


def _write_text(path, text, force):
    _save(path, lambda handle: handle.write(text), binary=False, force=force)


def _thumbnail(path, target, force=False):
    """Save a JPEG thumbnail of ``path``, its longer side ``THUMB_SIZE`` pixels (a grey square
    when the image cannot be read)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            image = image.convert("RGB")
            scale = THUMB_SIZE / max(image.size)
            if scale > 1:  # small images (digits, icons) are enlarged with visible pixels
                size = tuple(max(1, round(side * scale)) for side in image.size)
                image = image.resize(size, Image.Resampling.NEAREST)
            else:
                image.thumbnail((THUMB_SIZE, THUMB_SIZE))
            image.load()
    except (OSError, ValueError):
        image = Image.new("RGB", (THUMB_SIZE, THUMB_SIZE), (200, 200, 200))
    _save(target, lambda handle: image.save(handle, "JPEG", quality=90), force=force)


def write_image_report(
    out_dir, paths, labels, confidence, n_clusters, *, title=None, root=None,
    n_clusters_scores=None, n_clusters_restarts=None, warnings=(), force=False,
):  # fmt: skip
    """Write ``out_dir/index.html`` with each cluster's size, confidence and thumbnails.

    Parameters
    ----------
    out_dir : str or path-like
        The report folder (created; its parent must exist). Thumbnails go in ``thumbs/``.
    paths : sequence of str
        The clustered image files, one per row of ``labels``.
    labels : array-like of shape (n_samples,)
        Cluster labels in ``0 .. n_clusters - 1``.
    confidence : array-like of shape (n_samples,)
        Each image's largest predicted cluster probability.
    n_clusters : int
        K.
    title : str, default=None
        The page title.
    root : str, default=None
        Captions show paths relative to this folder.
    n_clusters_scores : dict, default=None
        ``{K: criterion}`` of ``CCEClustering(n_clusters="auto")`` (its
        ``n_clusters_scores_``; ``n_clusters`` is the chosen K): the page then says which K
        was chosen and shows the curve (``n_clusters.png``, drawn when matplotlib is
        installed) and a table of the numbers.
    n_clusters_restarts : dict, default=None
        ``{K: restarts}`` (``n_clusters_restarts_``): the table marks the K whose criterion
        comes from the search's screening pass (fewer restarts than the others).
    warnings : sequence of str, default=()
        The fit's warnings, shown in a box under the title.
    force : bool, default=False
        Replace the files of an earlier report in ``out_dir``; without it their presence is
        an :class:`~skcce.cli._common.OutputExistsError` and nothing is written.

    Returns
    -------
    index : str
        The path of ``index.html``.

    Examples
    --------
    >>> import os, tempfile
    >>> from PIL import Image
    >>> from skcce.cli._report import write_image_report
    >>> tmp = tempfile.mkdtemp()
    >>> paths = [os.path.join(tmp, f"{i}.png") for i in range(3)]
    >>> for p in paths:
    ...     Image.new("RGB", (20, 20), "red").save(p)
    >>> index = write_image_report(os.path.join(tmp, "report"), paths, [0, 1, 1], [1, .9, .6], 2)
    >>> open(index).read().count('<section class="cluster"')
    2
    """
    out_dir = _prepare(out_dir, thumbs=True, force=force)
    summaries = summarize_clusters(labels, confidence, n_clusters)
    confidence = np.asarray(confidence, dtype=float)
    esc = html.escape

    def figure(i):
        name = f"{i:06d}.jpg"
        _thumbnail(paths[i], os.path.join(out_dir, "thumbs", name), force)
        shown = os.path.relpath(paths[i], root) if root else paths[i]
        return (
            f'<figure><img src="thumbs/{name}" alt="{esc(shown)}" title="{esc(shown)}">'
            f"<figcaption>{confidence[i]:.3f} {esc(os.path.basename(paths[i]))}</figcaption>"
            "</figure>"
        )

    def body(s):
        parts = [f'<h3>most confident</h3><div class="grid most">{_join(figure, s.most)}</div>']
        if len(s.least):
            parts.append(
                f'<h3>least confident</h3><div class="grid least">{_join(figure, s.least)}</div>'
            )
        return "".join(parts)

    intro = (
        f"{len(paths)} images in {n_clusters} clusters, largest first. Confidence: the largest "
        "predicted cluster probability of an image."
    )
    extra = _n_clusters_section(
        out_dir, n_clusters_scores, n_clusters, need_figure=False, restarts=n_clusters_restarts,
        force=force,
    )  # fmt: skip
    page = _page(title or "skcce clusters", intro, summaries, body, extra, warnings)
    index = os.path.join(out_dir, "index.html")
    _write_text(index, page, force)
    return index


def _join(render, indices):
    return "".join(render(int(i)) for i in indices)


def _embed_2d(X, labels, random_state=0):
    """A 2-D embedding of (a subset of) ``X``; returns (points, labels of the points, method)."""
    rng = np.random.default_rng(random_state)
    rows = np.arange(len(X))
    if len(X) > MAP_POINTS:
        rows = np.sort(rng.choice(len(X), MAP_POINTS, replace=False))
    sub = np.asarray(X[rows], dtype=np.float32)
    try:
        import umap  # optional: umap-learn
    except ImportError:
        umap = None
    if umap is not None and len(sub) > 15:
        points = umap.UMAP(n_components=2, random_state=random_state).fit_transform(sub)
        return points, np.asarray(labels)[rows], "UMAP"
    from sklearn.decomposition import PCA

    if sub.shape[1] == 1:
        points = np.column_stack([sub[:, 0], np.zeros(len(sub))])
    else:
        points = PCA(n_components=2, random_state=random_state).fit_transform(sub)
    return points, np.asarray(labels)[rows], "PCA"


def _figures(out_dir, X, labels, summaries, n_clusters, force):
    """Write ``map.png`` and ``clusters.png``; return the map's method (PCA or UMAP)."""
    FigureCanvasAgg, Figure = _matplotlib()
    points, point_labels, method = _embed_2d(X, labels)
    colours = _colours(n_clusters)
    fig = Figure(figsize=(7, 6), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    size = max(2.0, min(20.0, 4000.0 / max(len(points), 1)))
    for k in range(n_clusters):
        mask = point_labels == k
        if mask.any():
            ax.scatter(points[mask, 0], points[mask, 1], s=size, color=colours[k], label=str(k))
    ax.set_title(f"{method} of the features, coloured by cluster ({len(points)} points)")
    ax.set_xticks([])
    ax.set_yticks([])
    if n_clusters <= 20:
        ax.legend(title="cluster", fontsize="small", markerscale=2, loc="best")
    fig.tight_layout()
    _save(os.path.join(out_dir, "map.png"), lambda h: fig.savefig(h, format="png"), force=force)

    fig = Figure(figsize=(max(6, 0.35 * n_clusters + 2), 5), dpi=100)
    FigureCanvasAgg(fig)
    top, bottom = fig.subplots(2, 1, sharex=True)
    names = [str(s.cluster) for s in summaries]
    top.bar(names, [s.size for s in summaries], color=[colours[s.cluster] for s in summaries])
    top.set_ylabel("size")
    top.set_title("clusters, largest first")
    means = [0.0 if not np.isfinite(s.mean_confidence) else s.mean_confidence for s in summaries]
    bottom.bar(names, means, color=[colours[s.cluster] for s in summaries])
    bottom.set_ylim(0, 1)
    bottom.set_ylabel("mean confidence")
    bottom.set_xlabel("cluster")
    fig.tight_layout()
    path = os.path.join(out_dir, "clusters.png")
    _save(path, lambda handle: fig.savefig(handle, format="png"), force=force)
    return method


def _colours(n):
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(k % cmap.N) for k in range(n)]


def write_features_report(
    out_dir, X, labels, confidence, n_clusters, *, ids=None, title=None, n_clusters_scores=None,
    n_clusters_restarts=None, warnings=(), force=False,
):  # fmt: skip
    """Write ``out_dir/index.html`` for clustered features: a 2-D map, sizes and confidences.

    Parameters
    ----------
    out_dir : str or path-like
        The report folder (created; its parent must exist).
    X : array-like of shape (n_samples, n_features)
        The features (a memory map is read row subset by row subset).
    labels : array-like of shape (n_samples,)
        Cluster labels in ``0 .. n_clusters - 1``.
    confidence : array-like of shape (n_samples,)
        Each row's largest predicted cluster probability.
    n_clusters : int
        K.
    ids : array-like of shape (n_samples,), default=None
        Row names shown in the lists beside the row index (``None``: the row index alone).
        Entries read "row 257, confidence 0.982", or "id cat_12 (row 257), confidence
        0.982" with ``ids``, by decreasing confidence and without rank numbers.
    title : str, default=None
        The page title.
    n_clusters_scores : dict, default=None
        ``{K: criterion}`` of ``CCEClustering(n_clusters="auto")`` (its
        ``n_clusters_scores_``; ``n_clusters`` is the chosen K): the page then says which K
        was chosen and shows the curve (``n_clusters.png``) and a table of the numbers.
    n_clusters_restarts : dict, default=None
        ``{K: restarts}`` (``n_clusters_restarts_``): the table marks the K whose criterion
        comes from the search's screening pass (fewer restarts than the others).
    warnings : sequence of str, default=()
        The fit's warnings, shown in a box under the title.
    force : bool, default=False
        Replace the files of an earlier report in ``out_dir``; without it their presence is
        an :class:`~skcce.cli._common.OutputExistsError` and nothing is written.

    Returns
    -------
    index : str
        The path of ``index.html``.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from skcce.cli._report import write_features_report
    >>> X = np.random.default_rng(0).normal(size=(30, 5))
    >>> labels = (X[:, 0] > 0).astype(int)
    >>> index = write_features_report(tempfile.mkdtemp(), X, labels, np.ones(30), 2)
    >>> sorted(os.listdir(os.path.dirname(index)))
    ['clusters.png', 'index.html', 'map.png']
    >>> page = open(index).read()
    >>> page[page.index("most confident rows"):].split("</li>")[0]
    'most confident rows</h3><ul class="ids most"><li>row 2, confidence 1.000'
    """
    out_dir = _prepare(out_dir, thumbs=False, force=force)
    summaries = summarize_clusters(labels, confidence, n_clusters)
    method = _figures(out_dir, X, labels, summaries, n_clusters, force)
    confidence = np.asarray(confidence, dtype=float)
    ids = None if ids is None else np.asarray(ids)
    esc = html.escape

    def entry(i):
        row = f"row {i}" if ids is None else f"id {esc(str(ids[i]))} (row {i})"
        return f"<li>{row}, confidence {confidence[i]:.3f}</li>"

    def body(s):
        parts = [f'<h3>most confident rows</h3><ul class="ids most">{_join(entry, s.most)}</ul>']
        if len(s.least):
            parts.append(
                f'<h3>least confident rows</h3><ul class="ids least">{_join(entry, s.least)}</ul>'
            )
        return "".join(parts)

    curve = _n_clusters_section(
        out_dir, n_clusters_scores, n_clusters, need_figure=True, restarts=n_clusters_restarts,
        force=force,
    )  # fmt: skip
    extra = curve + (
        f'<img class="plot" src="map.png" alt="{method} map of the features by cluster">'
        '<img class="plot" src="clusters.png" alt="cluster sizes and mean confidence">'
    )
    intro = (
        f"{len(X)} rows of {X.shape[1]} features in {n_clusters} clusters, largest first. "
        f"Map: {method}. Confidence: the largest predicted cluster probability of a row; rows "
        "are listed by decreasing confidence and named by their 0-based row index in the file."
    )
    page = _page(title or "skcce clusters", intro, summaries, body, extra, warnings)
    index = os.path.join(out_dir, "index.html")
    _write_text(index, page, force)
    return index
