"""Old private module paths of skcce 0.1.0, kept importable after the move to packages.

Models pickled by 0.1.0 name ``skcce._training.Inputs``; code written against 0.1.0 may import
``skcce._newton`` and the like. Each old path below is an alias of its new module (the same
module object, so attributes set through either name are shared). Nothing in skcce imports the
old paths; remove an entry once nothing outside needs it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: old private module path -> the module that now holds its public names
MOVED = {
    "skcce._training": "skcce._engine",
    "skcce._distributed": "skcce._engine._distributed",
    "skcce._checkpoint": "skcce._engine._checkpoint",
    "skcce._io": "skcce._engine._io",
    "skcce._duality": "skcce.solvers._duality",
    "skcce._em": "skcce.solvers._em",
    "skcce._master": "skcce.solvers._master",
    "skcce._newton": "skcce.solvers._newton",
    "skcce._pgd": "skcce.solvers._pgd",
    "skcce._response_np": "skcce.solvers._response_np",
    "skcce._sinkhorn": "skcce.solvers._sinkhorn",
    "skcce._cli_cluster": "skcce.cli.cluster",
    "skcce._reproduce": "skcce.cli.reproduce",
    "skcce._compare": "skcce.cli._compare",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.spec = module.__spec__  # importlib sets __spec__ to the alias's: put it back
        return module

    def exec_module(self, module):
        module.__spec__ = self.spec  # already executed under its new name


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    """Make the old paths importable (idempotent)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())  # before any finder of an older install
