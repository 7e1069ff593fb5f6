"""What ``default_feeds`` makes of an input's declaration, beyond ``arange(n) / n``: the
values and sizes a model expects, so a run with no inputs given does not fail on them.

- Symbolic dims of one name get one size: the size ``--shape`` gave it on any input, else 1.
- An integer input that indexes a table (Gather's indices, through casts and reshapes) counts
  modulo the table's smallest row count where that is under 10, so every id is valid.
- An input named like a mask (``attention_mask``) is ones.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from graphexec.ir import Graph

THROUGH = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand"})   # ids stay ids
INDEXED = {"Gather": 1, "GatherElements": 1}   # op -> the input that holds indices into input 0


def is_mask(name: str) -> bool:
    return "mask" in name.lower()


def bound_dims(graph: Graph, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
    """Symbolic dim name -> the size a given shape set it to (the first input that names it)."""
    bound: dict[str, int] = {}
    for name, shape in shapes.items():
        if name not in graph.inputs:
            continue   # refused where the feeds are made, with the inputs it could be
        declared = graph.values[name].type.shape
        if declared is not None and len(declared) == len(shape):
            for d, v in zip(declared, shape):
                if isinstance(d, str):
                    bound.setdefault(d, int(v))
    return bound


def made_shape(declared: tuple[Any, ...], bound: Mapping[str, int]) -> tuple[int, ...]:
    """A declared shape made concrete: a named dim takes its bound size (else 1), an unknown one 1."""
    return tuple(d if isinstance(d, int) and d >= 0 else bound.get(d, 1) if isinstance(d, str) else 1
                 for d in declared)


def unset_dims(graph: Graph, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, list[str]]:
    """Input -> the dims of its declared shape that defaulted to 1 (a name, or "dim I"),
    for the inputs ``shapes`` does not give: what ``--shape`` should set when a run fails."""
    bound = bound_dims(graph, shapes)
    out: dict[str, list[str]] = {}
    for name in graph.inputs:
        declared = graph.values[name].type.shape
        if name in shapes or declared is None:
            continue
        dims = [d if isinstance(d, str) else f"dim {i}" for i, d in enumerate(declared)
                if not (isinstance(d, int) and d >= 0) and not (isinstance(d, str) and d in bound)]
        if dims:
            out[name] = dims
    return out


def index_bound(graph: Graph, name: str) -> int | None:
    """The smallest row count of the tables input ``name`` indexes, or None when it indexes none."""
    consumers = graph.consumers()
    bound: int | None = None
    todo, seen = [name], {name}
    while todo:
        value = todo.pop()
        for node in consumers.get(value, ()):
            if node.op in THROUGH and node.inputs and node.inputs[0] == value:
                todo.extend(o for o in node.outputs if o and o not in seen)
                seen.update(node.outputs)
            elif node.op in INDEXED and len(node.inputs) > INDEXED[node.op] and node.inputs[INDEXED[node.op]] == value:
                rows = _rows(graph, node.inputs[0], int(node.attrs.get("axis", 0)))
                if rows is not None:
                    bound = rows if bound is None else min(bound, rows)
    return bound


def _rows(graph: Graph, table: str, axis: int) -> int | None:
    v = graph.values.get(table)
    shape = None if v is None else v.const.shape if v.const is not None else v.type.shape
    if not shape:
        return None
    d = shape[axis % len(shape)]
    return d if isinstance(d, int) and d > 0 else None


def made_values(graph: Graph, name: str, dtype: np.dtype, shape: tuple[int, ...], ramp: Any) -> np.ndarray:
    """The default value of input ``name``: ones for a mask, valid ids for an index, else ``ramp``'s."""
    if dtype.kind in "biu" and is_mask(name):
        return np.ones(shape, dtype)
    if dtype.kind in "iu":
        rows = index_bound(graph, name)
        if rows is not None and rows < 10:   # the ramp counts modulo 10: ids under 10 are valid already
            return (np.arange(int(np.prod(shape)), dtype=np.int64) % rows).astype(dtype).reshape(shape)
    return ramp(dtype, shape)
