"""The ``skcce`` command line: ``skcce demo``, ``skcce cluster PATH --n-clusters K`` and
``skcce reproduce table1|table2 --dataset D`` (one module each; ``_common``: what they share)."""

from skcce.cli._main import build_parser, main
from skcce.cli.demo import load_fashion_mnist as _load_fashion_mnist  # noqa: F401 (0.1.0 name)
from skcce.cli.demo import run_demo

__all__ = ["build_parser", "main", "run_demo"]
