"""Checking the feeds of a run against the graph's declared inputs."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from graphexec._limits import over_budget
from graphexec.engine.device_tensor import DeviceTensor
from graphexec.engine.made_inputs import bound_dims, made_shape, made_values
from graphexec.errors import FeedError
from graphexec.ir import Graph, TensorType
from graphexec.passes.size_check import INT64_MAX, check_fits, unholdable
from graphexec.runtime.profiles import DeviceProfile


def check_feeds(graph: Graph, feeds: Mapping[str, Any]) -> dict[str, TensorType]:
    """The concrete input types of ``feeds``, after checking names, dtypes and shapes.

    Symbolic dims must bind to the same size everywhere they appear.
    """
    unknown = [n for n in feeds if n not in graph.inputs]
    if unknown:
        raise FeedError(f"feed {unknown[0]!r} is not an input of the graph; inputs are: {', '.join(graph.inputs)}")
    missing = [n for n in graph.inputs if n not in feeds]
    if missing:
        raise FeedError(f"input {missing[0]!r} is missing from the feeds")
    bound: dict[str, int] = {}
    types: dict[str, TensorType] = {}
    for name in graph.inputs:
        declared = graph.values[name].type
        value = feeds[name]
        if declared.kind != "tensor" or not isinstance(value, (np.ndarray, DeviceTensor)):
            types[name] = declared
            continue
        _check_dtype(name, declared, value)
        _check_shape(name, declared, value, bound)
        types[name] = TensorType(value.dtype, tuple(int(d) for d in value.shape))
    return types


def feeds_key(feeds: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What ``check_feeds`` reads of ``feeds`` when every value is a plain array: the names
    in order, each dtype and shape (None otherwise). Equal keys give equal types, or the
    same error, so a session checks a key once (a run's check cost 20 us of a 400 us run)."""
    key = []
    for name, value in feeds.items():
        if type(value) is not np.ndarray:
            return None
        key.append((name, value.dtype, value.shape))
    return tuple(key)


def declared_types(graph: Graph) -> dict[str, TensorType]:
    """The input types a compile with no feeds is for: those ``check_feeds`` gives the
    inputs ``default_feeds`` makes, when each input declares a dtype it makes and a
    static shape (so ``compile()`` and ``simulate()`` share one plan); else none (each
    input as declared, symbolic dims unbound)."""
    types: dict[str, TensorType] = {}
    for name in graph.inputs:
        t = graph.values[name].type
        if t.kind != "tensor" or t.dtype is None or t.dtype.kind not in "fbiu" or t.shape is None \
                or not all(type(d) is int and d >= 0 for d in t.shape):
            return {}
        types[name] = TensorType(t.dtype, tuple(t.shape))
    return types


def _check_dtype(name: str, declared: TensorType, value: np.ndarray | DeviceTensor) -> None:
    if declared.dtype is not None and value.dtype != declared.dtype:
        if value.dtype.newbyteorder("=") == declared.dtype:   # the same name, the other byte order
            raise FeedError(f"input {name!r} must be {declared.dtype.name} in this machine's byte order "
                            f"({declared.dtype.str!r}), got the byte-swapped {value.dtype.str!r}; "
                            f"convert it with .astype({declared.dtype.str!r})")
        raise FeedError(f"input {name!r} must be {declared.dtype.name}, got {value.dtype.name}")


def _check_shape(name: str, declared: TensorType, value: np.ndarray | DeviceTensor, bound: dict[str, int]) -> None:
    if declared.shape is None:
        return
    if len(declared.shape) != len(value.shape):
        raise FeedError(f"input {name!r} must have rank {len(declared.shape)} "
                        f"(shape {_fmt(declared.shape)}), got shape {_fmt(value.shape)}")
    for i, (d, v) in enumerate(zip(declared.shape, value.shape)):
        if isinstance(d, int) and d != v:
            raise FeedError(f"input {name!r} dim {i} must be {d}, got {v} (shape {_fmt(value.shape)})")
        if isinstance(d, str):
            if bound.setdefault(d, v) != v:
                raise FeedError(f"input {name!r} dim {i} ({d!r}) is {v}, but {d!r} is {bound[d]} elsewhere")


def _fmt(shape: tuple) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def signature(types: Mapping[str, TensorType]) -> tuple:
    """A hashable key of the input types: one compiled plan per signature (the dtype
    object itself: equal exactly when the dtypes are, and ``str`` of one costs 1 us)."""
    return tuple(sorted([(n, t.dtype, t.shape, t.kind) for n, t in types.items()]))


def default_feeds(graph: Graph, shapes: Mapping[str, tuple[int, ...]] | None = None,
                  device: DeviceProfile | None = None) -> dict[str, np.ndarray]:
    """Deterministic inputs from the declared shapes; a symbolic dim not in ``shapes`` is
    the size a given shape set it to on another input, else 1 (``engine/made_inputs.py``).

    Floats are ``arange(n) / n`` reshaped (the light models' convention), integers
    count modulo 10 (modulo a smaller table they index), booleans alternate, masks are
    ones. With ``device``, an input it cannot hold is an OutOfMemoryError before anything
    is allocated.
    """
    shapes = dict(shapes or {})
    unknown = [n for n in shapes if n not in graph.inputs]
    if unknown:
        raise FeedError(f"a shape is given for {unknown[0]!r}, which is not an input of the graph; "
                        f"inputs are: {', '.join(graph.inputs)}")
    feeds = {}
    bound = bound_dims(graph, shapes)
    for name in graph.inputs:
        t = graph.values[name].type
        shape = shapes.get(name, t.shape)
        if t.kind != "tensor":   # declared (seq(...), optional(...)): there is no default value to make
            what = f"{'an' if t.kind[0] in 'aeiou' else 'a'} {t.kind}" + (f" of type {t.elem}" if t.elem else "")
            raise FeedError(f"input {name!r} is {what}; graphexec makes no default value for it: "
                            f"give it with --input {name}=FILE.npz (the form --save writes)")
        if t.dtype is None or shape is None:
            raise FeedError(f"input {name!r} has no declared type and shape; give one with --shape or --input")
        shape = made_shape(shape, bound)
        if t.dtype.kind not in "fbiu":
            raise FeedError(f"input {name!r} has dtype {t.dtype}; give it with --input")
        _check_size(name, TensorType(t.dtype, shape), device)
        feeds[name] = made_values(graph, name, t.dtype, shape, _deterministic)
    return feeds


def _check_size(name: str, t: TensorType, device: DeviceProfile | None) -> None:
    if t.nbytes == 0 and unholdable(t):
        raise FeedError(f"input {name!r} {t} is empty, but its other dims are too big for numpy to hold")
    if device is not None:
        check_fits(f"input {name!r}", t, device)
    elif t.nbytes > INT64_MAX:
        raise FeedError(f"input {name!r} {t} needs {t.nbytes} bytes, more than int64 can count")
    problem = over_budget(t.nbytes)
    if problem:
        raise FeedError(f"input {name!r} {t} {problem}")


CHUNK = 1 << 20  # elements computed at a time: the float64 ramp never costs more than 8 MiB


def _deterministic(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The default values, built in ``dtype`` a chunk at a time: peak memory is the array
    itself, not a float64 ramp of twice its size (the values are the same either way)."""
    n = math.prod(shape)
    out = np.empty(n, dtype=dtype)
    for start in range(0, n, CHUNK):
        base = np.arange(start, min(start + CHUNK, n), dtype=np.float64)
        if dtype.kind == "f":
            out[start:start + len(base)] = base / max(n, 1)
        elif dtype.kind == "b":
            out[start:start + len(base)] = base % 2
        else:
            out[start:start + len(base)] = base % 10
    return out.reshape(shape)
