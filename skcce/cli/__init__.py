"""The ``skcce`` command line: ``skcce demo``, ``skcce cluster PATH --n-clusters K`` and
``skcce reproduce table1|table2 --dataset D``."""

from skcce.cli._main import _load_fashion_mnist, build_parser, main, run_demo

__all__ = ["build_parser", "main", "run_demo"]
