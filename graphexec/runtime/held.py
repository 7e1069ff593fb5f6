"""Device attributes that every held launch must reach first (``Device._hold``).

Eager mode holds launches onto a full command queue and submits them in batches; anyone
who looks at the device's simulator, host clock or launch list must find them submitted,
so those three attributes are :class:`Submitted` descriptors.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Submitted(Generic[T]):
    """A Device attribute (its simulator, host clock, launches) read or set only after every
    held launch is submitted (``Device._hold``): whoever looks at the device sees it whole.
    The device's own hot path uses the bare ``_name``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, dev: Any, owner: Any = None) -> T:
        if dev is None:   # looked up on the class
            return self   # type: ignore[return-value]
        if dev._held:
            dev._submit_held()
        return getattr(dev, self.slot)   # type: ignore[no-any-return]

    def __set__(self, dev: Any, value: T) -> None:
        if dev._held:
            dev._submit_held()
        setattr(dev, self.slot, value)
