"""TransData: the device's data-format conversion between NCHW and NC1HWC0 (5HD).

On a DaVinci chip the cube and its neighbours keep a 4-D activation in NC1HWC0: C split
into C1 = ceil(C / C0) blocks of C0 channels, C0 innermost (16 for 16- and 32-bit types;
CANN's "data layout formats" guide, and its TransDataTo5HD API). Where an op needs the plain
layout (a Reshape or Transpose that splits the channel axis, a Slice or Concat on a channel
count C0 does not divide), GE puts a TransData between (``passes/layout.py``).

graphexec keeps every value in NCHW in its memory, so the kernel computes the identity: the
numbers are the op's input. Its cost is the device's: the whole tensor read in one layout and
written in the other, the 5HD side padded to whole C0 blocks, on the vector unit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphexec.kernels.cost import MAX_BLOCK_DIM, VECTOR_TILE_BYTES, Cost
from graphexec.kernels.registry import OpContext, fits, register

LAYOUT_DOMAIN = "graphexec.layout"   # the domain of the conversions the layout pass inserts


def padded_bytes(shape: tuple[int, ...], nbytes: float, c0: int) -> float:
    """The bytes of an NCHW tensor of ``nbytes`` laid out in NC1HWC0: C padded to whole C0."""
    c = shape[1] if len(shape) == 4 else 0
    return nbytes * (-(-c // c0) * c0) / c if c else nbytes


def _cost(in_shapes: list, out_shapes: list, moved: float, attrs: dict) -> Cost | None:
    """Read once and written once, one side padded to C0: a memory-bound vector pass."""
    shape = in_shapes[0] if in_shapes else None
    if shape is None or any(not isinstance(d, int) for d in shape):
        return None
    nd = moved / 2
    five = padded_bytes(tuple(shape), nd, int(attrs.get("c0", 16)))
    blocks = max(1, min(math.ceil(five / VECTOR_TILE_BYTES), MAX_BLOCK_DIM))
    elements = float(math.prod(shape)) * five / nd if nd else 0.0
    return Cost(elements, nd + five, "vector", blocks)


@register("TransData", domain=LAYOUT_DOMAIN, out=True, cost=_cost)
def trans_data(ctx: OpContext, x: Any, out: np.ndarray | None = None) -> Any:
    """The identity on values (graphexec's memory is NCHW on both sides of the conversion)."""
    if fits(out, x.shape, x.dtype):
        np.copyto(out, x)
        return out
    return np.array(x, copy=True)
