"""Grids of configurations (models x chips x streams x policies x cards), locally or on Ray.

The package is also the function: ``graphexec.sweep(...)`` (the public contract's
``gx.sweep``) calls :func:`graphexec.sweep.run.sweep`, while ``graphexec.sweep`` stays
this package, so ``graphexec.sweep.grid`` and the other modules are reached through it
(a function of the same name bound on ``graphexec`` would hide them).
"""

import inspect
import sys
from types import ModuleType
from typing import Any

from graphexec.sweep.run import BACKENDS, sweep

__all__ = ["BACKENDS", "sweep"]


class _Callable(ModuleType):
    """This package's class: a module that, called, runs :func:`sweep`."""

    __signature__ = inspect.signature(sweep)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _Callable
