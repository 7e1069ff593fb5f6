"""Every public eager entry's arguments checked against its annotations, as ACL's are.

``npu.abs(event)`` was "'Event' object has no attribute 'abs'", ``Tensor.flatten(event)`` a
TypeError from ``%``: the functions and methods trusted their arguments' kinds. The check is
``runtime/argcheck.py``'s, the one ACL's ``@api`` entries use, built once here from each
entry's own annotations when the package is imported; a wrong kind is
ACL_ERROR_INVALID_PARAM (100000) naming the entry and the parameter. Values (a dim in range,
a live handle) stay the bodies' to check.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Iterable

from graphexec.runtime.argcheck import checking


def check_entries(namespace: dict[str, Any], names: Iterable[str], classes: Iterable[type]) -> None:
    """Replace each public function of ``namespace`` (and its public defining module's name for
    it, as ``npu.memory``'s) and each public method of ``classes`` by its checked self."""
    for name in names:
        fn = namespace[name]
        if not inspect.isfunction(fn):
            continue
        checked = checking(fn, f"npu.{name}")
        namespace[name] = checked
        home = sys.modules[fn.__module__]
        if not any(part.startswith("_") for part in fn.__module__.split(".")) and getattr(home, name, None) is fn:
            setattr(home, name, checked)
    for cls in classes:
        for name in dir(cls):
            fn = inspect.getattr_static(cls, name)
            if not name.startswith("_") and inspect.isfunction(fn):
                setattr(cls, name, checking(fn, f"{cls.__name__}.{name}"))
