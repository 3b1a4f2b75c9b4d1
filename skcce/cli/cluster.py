"""``skcce cluster PATH --n-clusters K``: cluster a folder of images, or the rows of a features
file, from the command line.

``--n-clusters auto`` (``-k auto``) chooses K from the data (``CCEClustering(n_clusters="auto")``,
searching ``--n-clusters-range LOW HIGH``); the chosen K is printed and, with ``--report``, the
report shows the criterion of every K tried.

For a folder, features come from a frozen timm backbone
(:class:`~skcce._feature_extraction.FeatureExtractor`) and are clustered by
:class:`~skcce.CCEClustering`; the result is a CSV with the columns ``path,cluster,confidence``
(confidence = the largest predicted cluster probability). For a features file (``.npy``,
``.npz``, ``.csv``, ``.parquet``) its rows are clustered as they are, and the CSV's first
column is the row index or the file's id column.

No output file is replaced unless ``--force`` is given: an existing CSV or report file stops
the command before any work (and again at the moment of writing, should one appear meanwhile).
The fit's warnings are printed before the "wrote ..." lines, in the command's own words (the
advice names its flags: :data:`ADVICE_FLAGS`), and shown at the top of the report.

The top-level ``skcce`` command wires this in with :func:`add_cluster_parser`; the same command
runs on its own through :func:`cluster_main`.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import warnings

from skcce._advice import reword
from skcce.cli._common import (
    CommandError,
    check_output,
    n_clusters_arg,
    non_negative_int,
    one_line,
    positive_int,
    refuse_existing,
    run_command,
    write_file,
)

__all__ = [
    "ADVICE_FLAGS",
    "IMAGE_EXTENSIONS",
    "add_cluster_parser",
    "cluster_main",
    "find_images",
    "run_cluster",
]

#: How the command names the CCEClustering parameters its warnings advise changing
#: (:func:`skcce._advice.collapse_message`'s ``vocabulary``): parameter -> flag, or
#: (flag, {value: word}). Advice about a parameter without a flag here is left out.
ADVICE_FLAGS = {
    "lam": "--lam",
    "prior": ("--prior", {None: "uniform"}),
    "init": "--init",
    "n_init": "--n-init",
    "n_clusters": "--n-clusters",
}

#: File extensions (lower case) treated as images when scanning a folder.
IMAGE_EXTENSIONS = frozenset(
    {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pbm"}
)

_DESCRIPTION = (
    "Cluster a folder of images (searched recursively) with a frozen timm backbone and "
    "collision cross-entropy clustering; write path,cluster,confidence rows to a CSV file. "
    "Given a features file (.npy, .npz, .csv, .parquet) instead, cluster its rows and write "
    "index (or the id column),cluster,confidence. Pretrained weights are downloaded on first "
    "use; offline, pass --weights FILE or use a Hugging Face cache with HF_HUB_OFFLINE=1. "
    "With -k auto the number of clusters is chosen from the data."
)


#: The ``cluster`` line of ``skcce --help``: both kinds of input.
SUMMARY = "cluster a folder of images, or a features file (.npy, .npz, .csv, .parquet)"


def find_images(root):
    """List the image files under ``root``, recursively, sorted by their relative path.

    Hidden files and folders (names starting with ``"."``, e.g. macOS ``._*`` resource forks)
    are skipped; symbolic links to folders are not followed.

    Parameters
    ----------
    root : str or path-like
        The folder to search.

    Returns
    -------
    paths : list of str
        ``os.path.join(root, ...)`` for every file whose extension (any case) is in
        :data:`IMAGE_EXTENSIONS`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from skcce.cli.cluster import find_images
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "b").mkdir()
    >>> for name in ["a.PNG", "b/c.jpg", "notes.txt", ".hidden.png"]:
    ...     _ = (root / name).write_bytes(b"")
    >>> [pathlib.Path(p).relative_to(root).as_posix() for p in find_images(root)]
    ['a.PNG', 'b/c.jpg']
    """
    root = os.fspath(root)
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
                found.append(os.path.join(folder, name))
    found.sort(key=lambda path: os.path.relpath(path, root).split(os.sep))
    return found


def add_cluster_parser(subparsers):
    """Add the ``cluster`` sub-command to an :mod:`argparse` sub-parsers object.

    The sub-parser's defaults hold ``func=run_cluster``, so a top-level CLI runs it with
    ``args = parser.parse_args(); return args.func(args)``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The object returned by ``ArgumentParser.add_subparsers()``.

    Returns
    -------
    parser : argparse.ArgumentParser
        The ``cluster`` sub-parser.

    Examples
    --------
    >>> import argparse
    >>> from skcce.cli.cluster import add_cluster_parser
    >>> parser = argparse.ArgumentParser(prog="skcce")
    >>> _ = add_cluster_parser(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["cluster", "photos", "--n-clusters", "5"])
    >>> args.n_clusters, args.model, args.out, args.func.__name__
    (5, 'resnet50', 'labels.csv', 'run_cluster')
    >>> argv = ["cluster", "photos", "-k", "auto", "--n-clusters-range", "2", "9"]
    >>> args = parser.parse_args(argv)
    >>> args.n_clusters, args.n_clusters_range
    ('auto', (2, 9))
    """
    parser = subparsers.add_parser("cluster", help=SUMMARY, description=_DESCRIPTION)
    _add_arguments(parser)
    parser.set_defaults(func=run_cluster)
    return parser


def _add_arguments(parser):
    parser.add_argument(
        "path",
        help="folder of images (searched recursively), or a features file: .npy (memory-mapped), "
        ".npz, .csv or .parquet (the last two need pandas/pyarrow: pip install skcce[tables])",
    )
    parser.add_argument(
        "--n-clusters",
        "-k",
        type=n_clusters_arg,
        required=True,
        metavar="K",
        help="number of clusters: a positive integer, or 'auto' to choose it from the data (one "
        "clustering per K of --n-clusters-range; the report shows the criterion of each)",
    )
    parser.add_argument(
        "--n-clusters-range",
        nargs=2,
        type=positive_int,
        action=_RangeAction,
        default=None,
        metavar=("LOW", "HIGH"),
        help="with -k auto: the smallest and largest K tried, both included (default: 2 20, "
        "HIGH capped at the number of samples); LOW 1 lets it answer that there are no clusters",
    )
    parser.add_argument("--model", default="resnet50", help="timm model name (default: resnet50)")
    parser.add_argument(
        "--weights",
        default=None,
        metavar="FILE",
        help="local weights file (.safetensors/.pth) instead of downloading (for offline use)",
    )
    parser.add_argument(
        "--no-pretrained",
        dest="pretrained",
        action="store_false",
        help="use randomly initialised backbone weights (for testing)",
    )
    parser.add_argument(
        "--out",
        "-o",
        default="labels.csv",
        help="output CSV with columns path,cluster,confidence (for a features file: index or "
        "the id column,cluster,confidence); '-' for stdout (default: labels.csv)",
    )
    parser.add_argument(
        "--force",
        "-f",
        action="store_true",
        help="overwrite the --out file and the files of an earlier --report; without it the "
        "command stops, before any work, when one of them exists",
    )
    parser.add_argument("--batch-size", type=positive_int, default=64, help="default: 64")
    parser.add_argument(
        "--device", default="auto", help="auto (default), cpu, cuda, cuda:1, mps, ..."
    )
    parser.add_argument(
        "--num-workers", type=non_negative_int, default=0, help="image decoding processes"
    )
    parser.add_argument(
        "--image-size", type=positive_int, default=None, help="input resolution (model default)"
    )
    parser.add_argument(
        "--lam",
        type=float,
        default=None,
        metavar="LAMBDA",
        help="CCEClustering's lam: the weight of the fairness term of the pseudo-label step "
        "(larger: cluster sizes held closer to the prior; default: CCEClustering's)",
    )
    parser.add_argument(
        "--prior",
        choices=("uniform", "estimate"),
        default=None,
        help="CCEClustering's prior: 'uniform' (prior=None) for clusters of equal sizes, "
        "'estimate' to learn the sizes while training (classes of unequal sizes); default: "
        "CCEClustering's",
    )
    parser.add_argument(
        "--init",
        choices=("random", "kmeans"),
        default=None,
        help="CCEClustering's init: how each restart's linear head starts (random, or from a "
        "KMeans assignment); default: CCEClustering's",
    )
    parser.add_argument(
        "--n-init",
        type=positive_int,
        default=None,
        metavar="N",
        help="CCEClustering's n_init: independent restarts, the most consistent one kept; "
        "default: CCEClustering's",
    )
    parser.add_argument(
        "--whiten",
        action="store_true",
        help="CCEClustering's whiten=True: train in the clusters' shared covariance (helps "
        "low-dimensional features with elongated clusters; see the user guide)",
    )
    parser.add_argument(
        "--whiten-strength",
        type=float,
        default=None,
        metavar="S",
        help="CCEClustering's whiten=S, S in [0, 1]: whiten part-way (e.g. 0.75; 1 is --whiten)",
    )
    parser.add_argument("--random-state", type=int, default=None, help="seed for reproducibility")
    parser.add_argument("--verbose", "-v", action="count", default=0, help="show progress")
    parser.add_argument(
        "--array", default=None, metavar="NAME", help=".npz features file: the features array"
    )
    parser.add_argument(
        "--id-column",
        default=None,
        metavar="NAME",
        help="features file: the column (.csv/.parquet) or 1-D array (.npz) naming the rows "
        "(default: a table's only non-numeric column, else the row index)",
    )
    parser.add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="also write DIR/index.html: each cluster's size, mean confidence and its most and "
        "least confident images (a 2-D map and bar charts for a features file)",
    )
    return parser


class _RangeAction(argparse.Action):
    """Store ``--n-clusters-range LOW HIGH`` as a tuple; ``LOW > HIGH`` is a usage error."""

    def __call__(self, parser, namespace, values, option_string=None):
        low, high = values
        if low > high:
            raise argparse.ArgumentError(self, f"LOW ({low}) exceeds HIGH ({high})")
        setattr(namespace, self.dest, (low, high))


def _build_parser(prog="skcce cluster"):
    return _add_arguments(argparse.ArgumentParser(prog=prog, description=_DESCRIPTION))


def cluster_main(argv=None):
    """Run ``skcce cluster`` with the given arguments.

    Parameters
    ----------
    argv : list of str, default=None
        Command-line arguments after ``cluster``; ``None`` reads ``sys.argv[1:]``.

    Returns
    -------
    status : int
        0 on success, 1 on an error (reported as one line on stderr), 2 on a usage error.

    Examples
    --------
    >>> from skcce.cli.cluster import cluster_main
    >>> cluster_main(["/no/such/folder", "--n-clusters", "3"])
    1
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors and --help
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    return run_cluster(args)


def run_cluster(args):
    """Handler of ``skcce cluster`` for parsed arguments (see :func:`add_cluster_parser`).

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments.

    Returns
    -------
    status : int
        0 on success, 1 on an error (one line on stderr, no traceback). Warnings (e.g. empty
        clusters) are printed as one line each on stderr, those of the fit before the
        "wrote ..." lines.

    Examples
    --------
    >>> import argparse
    >>> from skcce.cli.cluster import add_cluster_parser, run_cluster
    >>> parser = argparse.ArgumentParser(prog="skcce")
    >>> _ = add_cluster_parser(parser.add_subparsers())
    >>> run_cluster(parser.parse_args(["cluster", "/no/such/folder", "-k", "2"]))
    1
    """

    def action():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            shown = _Warnings(caught)
            try:
                _run(args, shown)
            finally:
                shown.flush()

    return run_command("skcce cluster", action)


class _Warnings:
    """The warnings caught so far (``caught``, of ``warnings.catch_warnings(record=True)``),
    in the command's words (:data:`ADVICE_FLAGS`), each printed once on stderr."""

    def __init__(self, caught):
        self.caught = caught
        self.messages = {}  # an ordered set

    def flush(self):
        """Print the warnings not printed yet; return every message so far."""
        for record in self.caught:
            message = one_line(reword(record.message, ADVICE_FLAGS))
            if message not in self.messages:
                self.messages[message] = None
                print(f"skcce cluster: warning: {message}", file=sys.stderr)
        del self.caught[:]
        return list(self.messages)


def _refuse_existing_outputs(args):
    """Stop before any work when an output file is there and ``--force`` is not given."""
    if args.force:
        return
    from skcce.cli._report import existing_report_files

    csv_file = [args.out] if args.out != "-" and os.path.lexists(args.out) else []
    report = [] if args.report is None else existing_report_files(args.report)
    options = [option for option, found in (("--out", csv_file), ("--report", report)) if found]
    refuse_existing(csv_file + report, " or ".join(options))


def _run(args, shown):
    root = args.path
    if not os.path.exists(root):
        raise CommandError(f"path not found: {root!r}")
    if args.n_clusters_range is not None and args.n_clusters != "auto":
        raise CommandError(
            f"--n-clusters-range applies to -k auto; -k {args.n_clusters} fixes K (drop one of "
            "the two)"
        )
    if os.path.isfile(root):
        return _run_features(args, shown)
    if args.array is not None or args.id_column is not None:
        raise CommandError("--array and --id-column apply to a features file, not a folder")
    _check_report(args.report)
    if not os.path.isdir(root):
        raise CommandError(f"path is not a folder: {root!r}")
    check_output(args.out)  # before the expensive part
    _refuse_existing_outputs(args)
    paths = find_images(root)
    if not paths:
        raise CommandError(
            f"no images found under {root!r} (looked for {', '.join(sorted(IMAGE_EXTENSIONS))})"
        )
    clustering = _clustering(args)
    _check_n_clusters(args, clustering, len(paths), "images found")

    from skcce._feature_extraction import FeatureExtractor, WeightsUnavailableError

    extractor = FeatureExtractor(
        args.model,
        pretrained=args.pretrained,
        weights=args.weights,
        batch_size=args.batch_size,
        device=args.device,
        num_workers=args.num_workers,
        image_size=args.image_size,
        verbose=args.verbose,
    )

    # Features are computed once and shared by fit_predict and predict_proba.
    try:
        features = extractor.fit_transform(paths)
    except WeightsUnavailableError as exc:  # the command line's advice, not the API's
        from skcce._weights import unavailable_message

        reason = exc.reason or str(exc)
        raise CommandError(unavailable_message(args.model, reason, cli=True)) from None
    labels = clustering.fit_predict(features)
    confidence = clustering.predict_proba(features).max(axis=1)
    messages = shown.flush()  # the fit's warnings, before "wrote ..."
    n_clusters, scores, restarts = _chosen(clustering, args)
    _write_csv(args.out, paths, labels, confidence, force=args.force)
    if args.out != "-":
        print(f"skcce cluster: wrote {len(paths)} rows to {args.out}", file=sys.stderr)
    if args.report is not None:
        from skcce.cli._report import write_image_report

        index = write_image_report(
            args.report, paths, labels, confidence, n_clusters,
            title=_title(root, args, n_clusters), root=root, n_clusters_scores=scores,
            n_clusters_restarts=restarts, warnings=messages, force=args.force,
        )  # fmt: skip
        print(f"skcce cluster: wrote the report {index}", file=sys.stderr)


def _clustering(args):
    from skcce._clustering import CCEClustering

    cluster_params = dict(
        n_clusters=args.n_clusters,
        device=args.device,
        random_state=args.random_state,
        verbose=args.verbose,
    )
    if args.n_clusters_range is not None:
        cluster_params["n_clusters_range"] = args.n_clusters_range
    if args.lam is not None:
        cluster_params["lam"] = args.lam
    if args.prior is not None:
        cluster_params["prior"] = None if args.prior == "uniform" else args.prior
    if args.init is not None:
        cluster_params["init"] = args.init
    if args.n_init is not None:
        cluster_params["n_init"] = args.n_init
    if args.whiten_strength is not None:
        cluster_params["whiten"] = args.whiten_strength
    elif args.whiten:
        cluster_params["whiten"] = True
    return CCEClustering(**cluster_params)


def _check_n_clusters(args, clustering, n_samples, what):
    """Refuse a K (or, with ``-k auto``, a range's lower bound) above ``n_samples`` before the
    expensive part; ``what`` names the samples ("images found", "rows of 'emb.npy'")."""
    if args.n_clusters != "auto":
        if args.n_clusters > n_samples:
            raise CommandError(
                f"--n-clusters {args.n_clusters} is more than the {n_samples} {what}"
            )
        return
    low, high = clustering.get_params()["n_clusters_range"]
    if low > n_samples:
        raise CommandError(
            f"--n-clusters-range {low} {high}: LOW is more than the {n_samples} {what}"
        )


def _chosen(clustering, args):
    """``(K, scores, restarts)``: the fitted number of clusters, and the curve of ``-k auto``
    (``n_clusters_scores_``, ``n_clusters_restarts_``; None for an integer K)."""
    if clustering.n_clusters != "auto":
        return clustering.n_clusters, None, None
    k = int(clustering.n_clusters_)
    scores = {int(key): float(value) for key, value in clustering.n_clusters_scores_.items()}
    tried = f"{min(scores)}..{max(scores)}" if scores else "none"
    best = f", criterion {scores[k]:.3f}" if k in scores else ""
    seed = "" if args.random_state is not None else ", --random-state N to repeat the choice"
    print(
        f"skcce cluster: -k auto chose K={k}{best} (K tried: {tried}; "
        f"the report's curve shows every K, pass -k K to overrule{seed})",
        file=sys.stderr,
    )
    return k, scores, clustering.n_clusters_restarts_


def _title(path, args, n_clusters):
    if args.n_clusters == "auto":
        return f"skcce cluster {path} -k auto (chose K={n_clusters})"
    return f"skcce cluster {path} -k {n_clusters}"


def _check_report(report):
    if report is None:
        return
    parent = os.path.dirname(os.path.abspath(report))
    if os.path.exists(report) and not os.path.isdir(report):
        raise CommandError(f"--report {report!r} is a file; give a folder for the report")
    if not os.path.isdir(parent):
        raise CommandError(f"cannot write the report in {report!r}: {parent!r} does not exist")


def _run_features(args, shown):
    """``skcce cluster FILE``: cluster the rows of a features file."""
    from skcce.cli._features_file import FEATURE_EXTENSIONS, read_features

    if os.path.splitext(args.path)[1].lower() in IMAGE_EXTENSIONS:
        raise CommandError(
            f"path is not a folder: {args.path!r} is an image; pass the folder that holds the "
            f"images, or a features file ({', '.join(FEATURE_EXTENSIONS)})"
        )
    check_output(args.out)
    _check_report(args.report)
    _refuse_existing_outputs(args)
    if args.report is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CommandError(
                "--report on a features file draws figures with matplotlib: "
                "pip install skcce[report]"
            ) from None
    table = read_features(args.path, array=args.array, id_column=args.id_column)
    clustering = _clustering(args)
    _check_n_clusters(args, clustering, len(table.X), f"rows of {args.path!r}")
    labels = clustering.fit_predict(table.X)
    confidence = clustering.predict_proba(table.X).max(axis=1)
    messages = shown.flush()  # the fit's warnings, before "wrote ..."
    n_clusters, scores, restarts = _chosen(clustering, args)
    _write_csv(
        args.out, table.row_ids(), labels, confidence, header=table.id_name, force=args.force
    )
    if args.out != "-":
        print(f"skcce cluster: wrote {len(labels)} rows to {args.out}", file=sys.stderr)
    if args.report is not None:
        from skcce.cli._report import write_features_report

        index = write_features_report(
            args.report, table.X, labels, confidence, n_clusters, ids=table.ids,
            title=_title(args.path, args, n_clusters), n_clusters_scores=scores,
            n_clusters_restarts=restarts, warnings=messages, force=args.force,
        )  # fmt: skip
        print(f"skcce cluster: wrote the report {index}", file=sys.stderr)


def _write_rows(handle, paths, labels, confidence, header="path"):
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow([header, "cluster", "confidence"])
    for path, label, conf in zip(paths, labels, confidence, strict=True):
        writer.writerow([path, int(label), f"{float(conf):.6f}"])


def _write_csv(out, paths, labels, confidence, header="path", force=False):
    """Write the CSV atomically, replacing a file only with ``force``
    (:func:`skcce.cli._common.write_file`), or to stdout for ``-``.

    ``paths`` are the row names: image paths, or a features file's ids (``header`` names
    their column: ``"index"`` or the id column).
    """
    if out == "-":
        _write_rows(sys.stdout, paths, labels, confidence, header)
        return
    write = lambda handle: _write_rows(handle, paths, labels, confidence, header)  # noqa: E731
    write_file(out, write, force=force, option="--out")
