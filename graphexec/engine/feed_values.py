"""Feeds as the user gives them: arrays, or what converts cleanly to the declared dtype.

A Python list, a scalar or a numpy scalar for a tensor input becomes an array of the
input's declared dtype when every value survives the conversion (ints into floats, a
float list into float32); None, strings, objects, ragged lists and values that would
change (a float into an int input, 300 into uint8) are one line each, where they used
to pass through unchecked and the run quietly read zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from graphexec.engine.device_tensor import DeviceTensor
from graphexec.errors import FeedError
from graphexec.ir import Graph, TensorType

_INTO = {"b": "biufc", "i": "biufc", "u": "biufc", "f": "fc", "c": "c"}   # kinds a value may become


def check_mapping(feeds: Any) -> None:
    """Feeds are a mapping of input name to array: one line naming the type otherwise."""
    if type(feeds) is not dict and not isinstance(feeds, Mapping):   # a dict first: the ABC check costs more
        raise FeedError(f"feeds must be a mapping of input name to array, not {type(feeds).__name__}")


def as_feeds(graph: Graph, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """``feeds`` with every tensor input as a numpy array (see the module doc)."""
    check_mapping(feeds)
    values = graph.values
    return {k: v if type(v) is np.ndarray and (k not in values or values[k].type.kind == "tensor")   # an array as is
            else _as_feed(graph, k, v) for k, v in feeds.items()}


def _as_feed(graph: Graph, name: str, value: Any) -> Any:
    if isinstance(value, DeviceTensor):   # kept on the device by an earlier run: it stays there
        return value
    declared = graph.values[name].type if name in graph.values and name in graph.inputs else None
    if declared is not None and declared.kind in _CONTAINERS:
        return _container(name, declared, value)
    if isinstance(value, np.ndarray) or declared is None or declared.kind != "tensor":
        return value if isinstance(value, (np.ndarray, list, dict)) or value is None else np.asarray(value)
    what = type(value).__name__
    if value is None:
        raise FeedError(f"input {name!r} is None; it takes a {declared} tensor")
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError):
        raise FeedError(f"input {name!r}: this {what} does not make an array (ragged?)") from None
    if arr.dtype.kind in "OUSVM":
        raise FeedError(f"input {name!r}: a {what} of {arr.dtype} values is not a {declared} tensor")
    want = declared.dtype
    if want is None or arr.dtype == want:
        return arr
    refused = FeedError(f"input {name!r}: the {what}'s {arr.dtype} values do not convert to {want} unchanged")
    if want.kind not in _INTO[arr.dtype.kind]:
        raise refused
    with np.errstate(all="ignore"):
        converted = arr.astype(want)
    if want.kind not in "fc" and not np.array_equal(converted, arr):   # floats may round, not wrap
        raise refused
    return converted


_CONTAINERS = {"sequence": (list, tuple), "map": (dict,)}


def _container(name: str, declared: TensorType, value: Any) -> Any:
    """A sequence input as a list (a tuple too), a map input as a dict: one line otherwise."""
    if not isinstance(value, _CONTAINERS[declared.kind]):
        what = "a list" if declared.kind == "sequence" else "a dict"
        raise FeedError(f"input {name!r} is a {declared.elem or declared.kind}: give {what}, "
                        f"not a {type(value).__name__}")
    return list(value) if isinstance(value, tuple) else value
