"""Public names imported on first use (PEP 562), so ``import poslab`` stays fast."""

from __future__ import annotations

import importlib


def lazy_exports(package: str, exports: dict[str, str]):
    """``__getattr__`` and ``__dir__`` for ``package`` that import each name from its submodule on first use.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    exports : dict of str to str
        Public name -> the submodule (relative to ``package``) that defines it.

    Returns
    -------
    (callable, callable)
        The module-level ``__getattr__`` and ``__dir__``. A name found once is stored in the package's
        namespace, so later look-ups do not call ``__getattr__`` again.
    """

    def __getattr__(name):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__():
        return sorted(set(vars(importlib.import_module(package))) | set(exports))

    return __getattr__, __dir__
