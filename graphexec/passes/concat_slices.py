"""GE's concat no-task: a Concat whose inputs can lie side by side launches nothing.

When every dim before the axis is 1, each input is one contiguous slice of the output,
so the producers write straight into their slice and the Concat disappears (GE's
``_no_task``). Inputs must be written by tasks (not constants, graph inputs or views),
feed no other no-task Concat and start on a 32-byte boundary.
"""

from __future__ import annotations

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
