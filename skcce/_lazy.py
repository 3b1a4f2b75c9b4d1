"""Lazy imports: the public names of a package (PEP 562), so that importing it does not import
torch, and the modules of an optional extra, imported where they are first needed."""

from __future__ import annotations

import importlib


def attach(namespace: dict, names: dict[str, str]):
    """The ``__getattr__`` and ``__dir__`` of a package whose ``names`` load on first use.

    Parameters
    ----------
    namespace : dict
        The package's ``globals()``: a name, once imported, is stored there, so later
        lookups skip ``__getattr__``.
    names : dict of str to str
        Public name -> the module that defines it (imported on first access of the name).

    Returns
    -------
    __getattr__, __dir__ : callable
        To be bound at the package's top level.

    Examples
    --------
    >>> namespace = {"__name__": "demo"}
    >>> getattr_, dir_ = attach(namespace, {"sqrt": "math"})
    >>> getattr_("sqrt")(4.0), "sqrt" in namespace
    (2.0, True)
    """
    package = namespace["__name__"]

    def __getattr__(name):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__


def import_extra(module: str, message: str):
    """Import ``module`` of an optional extra, or raise an ImportError with ``message``.

    Parameters
    ----------
    module : str
        The dotted module name (``"torchvision.transforms.v2"``).
    message : str
        What needs the module and how to install it (the ``pip install skcce[...]`` line).

    Returns
    -------
    module : module

    Raises
    ------
    ImportError
        With ``message``, chained to the original error, when the module cannot be imported.

    Examples
    --------
    >>> import_extra("math", "math is in the standard library").sqrt(4.0)
    2.0
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(message) from exc
