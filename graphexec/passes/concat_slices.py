"""GE's concat no-task: a Concat whose inputs can lie side by side launches nothing.

When every dim before the axis is 1, each input is one contiguous slice of the output,
so the producers write straight into their slice and the Concat disappears (GE's
``_no_task``). Inputs must be written by tasks (not constants, graph inputs or views),
feed no other no-task Concat and start on a 32-byte boundary.

On a chip that keeps activations in NC1HWC0 whose profile turns it on (``layout.strided_concat``;
off in the built-ins, see README's "How accurate is it"), a channel Concat of
convolutions' outputs whose channel counts C0 divides launches nothing at any batch
(``strided_concats``): CANN's conv writes its output's C1 blocks straight into the Concat's,
image by image (ConvConcatFusionPass, hiascend.com graph fusion reference atlasrr_30_0010:
StridedWrite, dim C a multiple of 16 for fp16 and float).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from graphexec.ir import Graph, Node

SLICE_ALIGN = 32


def _axis(node: Node, rank: int) -> int:
    axis = int(node.attrs.get("axis", 1 if rank > 1 else 0))
    return axis + rank if axis < 0 else axis


def no_task_concats(graph: Graph, views: set[str]) -> dict[str, tuple[str, int]]:
    """For each Concat input that moves into its output: (output name, byte offset)."""
    produced = {o for n in graph.nodes for o in n.outputs if o}
    barred = set(graph.inputs) | set(graph.outputs) | set(graph.constants) | views
    placed: dict[str, tuple[str, int]] = {}
    for node in graph.nodes:
        if node.op != "Concat" or node.domain or len(node.outputs) != 1:
            continue
        out = graph.values[node.outputs[0]].type
        if not out.is_static or not node.inputs or len(set(node.inputs)) != len(node.inputs):
            continue
        assert out.shape is not None
        if any(d != 1 for d in out.shape[:_axis(node, len(out.shape))]):
            continue
        slots, cursor = [], 0
        for x in node.inputs:
            t = graph.values[x].type
            if (x in barred or x in placed or x not in produced or not t.is_static or t.dtype != out.dtype
                    or cursor % SLICE_ALIGN):
                break
            slots.append((x, cursor))
            cursor += t.nbytes
        else:
            for x, off in slots:
                placed[x] = (node.outputs[0], off)
    return placed


def _conv_made(node: Node | None) -> bool:
    """Whether ``node`` is a convolution's kernel (a fused one's head included)."""
    if node is None:
        return False
    head = node.meta["members"][0] if node.domain == "graphexec.fused" else node
    return head.op == "Conv" and not head.domain


def strided_concats(graph: Graph, views: set[str], placed: dict[str, tuple[str, int]],
                    c0: int) -> dict[str, tuple[str, int, tuple[int, int, int]]]:
    """CANN's ConvConcatFusionPass on an NC1HWC0 chip: a channel Concat at any batch whose inputs
    are convolutions' outputs with C0 | C launches nothing; each convolution writes its C1 blocks
    of every image into the output through StridedWrite. For each such input: (output, byte
    offset of its first element, (axis, first, end) of its slice of the output's dims).

    In graphexec's NCHW memory such a slice is strided (one chunk per image), so the inputs must
    be read by the Concat alone (no view, in-place write or other reader of strided bytes), and
    the output must be no other Concat's input (its own slices would not be contiguous either).
    """
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    readers: dict[str, int] = {}
    for n in graph.nodes:
        for x in set(n.all_inputs):
            readers[x] = readers.get(x, 0) + 1
    concat_inputs = {x for n in graph.nodes if n.op == "Concat" for x in n.inputs}
    barred = set(graph.inputs) | set(graph.outputs) | set(graph.constants) | views | set(placed)
    out: dict[str, tuple[str, int, tuple[int, int, int]]] = {}
    for node in graph.nodes:
        if node.op != "Concat" or node.domain or len(node.outputs) != 1 or node.outputs[0] in concat_inputs:
            continue
        t = graph.values[node.outputs[0]].type
        if (not t.is_static or len(t.shape or ()) != 4 or _axis(node, 4) != 1
                or len(set(node.inputs)) != len(node.inputs)):
            continue
        dims = cast("tuple[int, ...]", t.shape)   # static: all ints
        inner = dims[2] * dims[3] * cast(np.dtype, t.dtype).itemsize
        slots, start = [], 0
        for x in node.inputs:
            s = graph.values[x].type
            c = cast(int, s.shape[1]) if s.is_static and len(s.shape or ()) == 4 else 0   # type: ignore[index]
            if (x in barred or x in out or not c or c % c0 or s.dtype != t.dtype or readers.get(x) != 1
                    or not _conv_made(producer.get(x))):
                break
            slots.append((x, (node.outputs[0], start * inner, (1, start, start + c))))
            start += c
        else:
            out.update(slots)
    return out
