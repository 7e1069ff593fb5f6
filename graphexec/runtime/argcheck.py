"""Every public ACL and eager entry's arguments checked against its own annotations before it runs.

An argument of the wrong kind (None for a size, a stream where an event goes, text for a
pointer, an event where ``npu.abs`` takes a tensor) used to reach the body and come back as a
raw TypeError or AttributeError, or worse, go into a stream and fail at the next unrelated
call. The annotation says what each parameter takes; this module turns each annotation into
one check, once, when the entry is defined, and refuses a wrong argument with
ACL_ERROR_INVALID_PARAM naming the entry and the parameter. An annotation it does not know,
or a parameter without one, is an error at import, so no entry goes unchecked. Values (a size
> 0, a byte 0..255, a live handle, a dim in range) stay the body's to check. Used by
``acl``'s ``@api`` and by ``npu``'s public functions and Tensor/Stream/Event methods.
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any, Callable

import numpy as np

from graphexec.runtime.codes import invalid_param

Check = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return type(v) is int or isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _number(v: Any) -> bool:
    return _int(v) or isinstance(v, (float, np.floating))


def _callable(v: Any) -> bool:
    return callable(v)


def _ints(v: Any) -> bool:
    return isinstance(v, (tuple, list)) and all(map(_int, v))


_PLAIN: dict[str, tuple[Check | None, str]] = {
    "Any": (None, "anything"),
    "None": (lambda v: v is None, "None"),   # listed last in an annotation: checked last
    "int": (_int, "an int"),
    "builtins.int": (_int, "an int"),   # inside a class with an ``int`` method
    "float": (_number, "a number"),
    "builtins.float": (_number, "a number"),
    "bool": (lambda v: isinstance(v, (bool, np.bool_)) or _int(v) and v in (0, 1), "a bool"),
    "str": (lambda v: isinstance(v, (str, os.PathLike)), "a str"),
    "dict": (lambda v: isinstance(v, dict), "a dict"),
    "np.ndarray": (lambda v: isinstance(v, np.ndarray), "a numpy array"),
    "tuple[int, ...]": (_ints, "a tuple of ints"),
    "list[int]": (_ints, "a list of ints"),
}


def _of_class(name: str) -> Check:
    """An instance of the class called ``name`` (Stream, Event, Context, DeviceProfile): by
    name, since the classes live in packages on both sides of this one; each type's answer is
    kept, as an entry is called in loops."""
    known: dict[type, bool] = {}

    def check(v: Any) -> bool:
        t = type(v)
        found = known.get(t)
        if found is None:
            found = known[t] = any(c.__name__ == name for c in t.__mro__)
        return found

    return check


def _either(checks: list[Check]) -> Check:
    """One check of alternatives, without a generator per call (an entry's calls are hot)."""
    if len(checks) == 1:
        return checks[0]
    first, rest = checks[0], _either(checks[1:])
    return lambda v: first(v) or rest(v)


def _sequence(item: Check | None, what: str) -> tuple[Check, str]:
    """A list or tuple whose every item passes ``item``."""
    if item is None:
        return (lambda v: isinstance(v, (list, tuple))), "a list or tuple"
    items = what.split(" ", 1)[-1] + "s"   # "a Tensor" -> "Tensors"
    return (lambda v: isinstance(v, (list, tuple)) and all(map(item, v))), f"a list or tuple of {items}"


def _kind(annotation: str) -> tuple[Check | None, str]:
    """The check and the words for one annotation, its ``|`` alternatives each checked."""
    parts: list[tuple[Check | None, str]] = []
    for alt in annotation.split(" | "):
        if alt.startswith("Callable["):
            parts.append((_callable, "a callable"))
        elif alt.startswith("Sequence[") and alt.endswith("]"):
            parts.append(_sequence(*_kind(alt[9:-1])))
        elif alt in _PLAIN:
            parts.append(_PLAIN[alt])
        elif alt.isidentifier() and alt[0].isupper():
            parts.append((_of_class(alt), f"{'an' if alt[0] in 'AEIOU' else 'a'} {alt}"))
        else:
            raise KeyError(alt)
    if any(check is None for check, _ in parts):
        return None, "anything"
    checks = [check for check, _ in parts if check is not None]
    return _either(checks), " or ".join(what for _, what in parts)


def _short(v: Any) -> str:
    text = f"a {type(v).__name__} array" if isinstance(v, np.ndarray) else repr(v)
    if text.startswith("<"):   # <... object at 0x...>: the address says nothing and changes each run
        kind = type(v).__name__
        text = f"{'an' if kind[0] in 'AEIOUaeiou' else 'a'} {kind}"
    return text if len(text) <= 40 else text[:37] + "..."


def checking(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` with its arguments checked against its annotations first (see the module); ``fn``
    itself where no parameter needs a check (a method's ``self`` needs none). ``name`` is the
    entry as its errors call it (``acl.record_event``, ``npu.abs``, ``Tensor.flatten``)."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.kind is not p.VAR_KEYWORD]
    checks: dict[str, tuple[Check, str]] = {}
    for p in params:
        if p.name == "self" and p.annotation is p.empty:
            continue
        try:
            check, what = _kind(p.annotation if isinstance(p.annotation, str) else "(no annotation)")
        except KeyError as e:
            raise TypeError(f"{fn.__qualname__}: no argument check for {e} in parameter {p.name}: "
                            f"{p.annotation}") from None
        if check is not None:
            checks[p.name] = (check, what)
    star = next((p.name for p in params if p.kind is p.VAR_POSITIONAL), "")
    var = checks.pop(star, None)   # ``*dims: int``: each extra positional argument
    if not checks and var is None:
        return fn
    positional = [checks.get(p.name) for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params]
    first_var = len(positional)

    def refuse(key: str, what: str, value: Any) -> None:
        raise invalid_param(f"{name}: {key} must be {what}, got {_short(value)}")

    def refuse_positional(args: tuple[Any, ...]) -> None:   # walked again, with names, only on failure
        for key, rule, value in zip(names, positional, args):
            if rule is not None and not rule[0](value):
                refuse(key, rule[1], value)

    def checked(*args: Any, **kwargs: Any) -> Any:
        for rule, value in zip(positional, args):
            if rule is not None and not rule[0](value):
                refuse_positional(args)
        if var is not None:
            for value in args[first_var:]:
                if not var[0](value):
                    refuse(f"each of *{star}", var[1], value)
        if kwargs:
            for key, value in kwargs.items():
                rule = checks.get(key)
                if rule is not None and not rule[0](value):
                    refuse(key, rule[1], value)
        return fn(*args, **kwargs)

    return functools.wraps(fn)(checked)


def numpy_dtype(dtype: Any, where: str) -> np.dtype:
    """``dtype`` as a numpy dtype (the device refuses a view of its bytes as objects)."""
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError):
        raise invalid_param(f"{where} dtype {_short(dtype)} is not a numpy dtype") from None
