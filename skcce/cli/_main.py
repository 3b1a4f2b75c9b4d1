"""The ``skcce`` command: the top-level parser and its sub-commands."""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    """The top-level argument parser with its sub-commands."""
    from skcce.cli.cluster import add_cluster_parser
    from skcce.cli.demo import add_demo_parser
    from skcce.cli.reproduce import add_reproduce_parser

    parser = argparse.ArgumentParser(
        prog="skcce", description="Collision cross-entropy self-labeled clustering."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_demo_parser(sub)
    add_cluster_parser(sub)
    add_reproduce_parser(sub)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``skcce`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
