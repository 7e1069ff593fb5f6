"""Model-local ONNX functions inlined at load, so their bodies are nodes like any other.

``onnx.inliner.inline_local_functions`` is right for nested calls, any listing order and
attribute references, but it leaves a call in place, silently, when the function imports
another opset version than the model (seen with onnx 1.23: a body in opset 13 called from an
opset-18 model stays one opaque call). Here each call is expanded on its own: the body's
attribute references take the call's values (or the function's defaults, or go), a body in
another opset version is converted to the model's by ``onnx.version_converter`` (after its
references are bound: the converter zeroes unbound ones), every name it defines gets the
call's prefix, and calls inside it (subgraphs included) are expanded the same way. A cycle,
a call into a function domain that names no function, or a body that cannot be converted is
one ModelLoadError naming the function.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Iterator

import onnx
from onnx import defs, version_converter

from graphexec._files import ASIDE_MIN_NODES, interruptible
from graphexec.errors import ModelLoadError
from graphexec.ir.onnx_proto import all_nodes, has_nodes, subgraphs

MAX_INLINED_NODES = 250_000   # inlining costs ~200 us and ~3.5 KB a node (2^16 nodes: 13.9 s, 230 MB measured)
MAX_FUNCTION_DEPTH = 64         # calls nested deeper than any exporter writes (torch: one per module level)
_Key = tuple[str, str, str]


def _dom(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _key(n: onnx.NodeProto | onnx.FunctionProto) -> _Key:
    return _dom(n.domain), n.op_type if isinstance(n, onnx.NodeProto) else n.name, getattr(n, "overload", "")


def _label(key: _Key) -> str:
    return f"{key[0]}::{key[1]}" + (f" (overload {key[2]!r})" if key[2] else "")


def inline_functions(model: onnx.ModelProto, where: str) -> None:
    """Expand every call of a model-local function in ``model`` (in place) and drop the
    functions; the opsets their bodies import are added to the model's where it has none."""
    if not model.functions:
        return
    inliner = _Inliner(model, where)
    price(inliner.functions, model.graph.node, where)
    nodes = inliner.expand(model.graph.node, ())
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    have = {_dom(o.domain) for o in model.opset_import}
    for domain, version in inliner.extra_opsets.items():
        if domain not in have:
            model.opset_import.append(onnx.helper.make_opsetid(domain, version))
    del model.functions[:]


class _Inliner:
    """The expansion state: functions by key, the model's opsets, a counter for prefixes."""

    def __init__(self, model: onnx.ModelProto, where: str) -> None:
        self.where = where
        self.functions = {_key(f): f for f in model.functions}
        self.function_domains = {k[0] for k in self.functions} - {"", "ai.onnx.ml"}
        self.opsets = {_dom(o.domain): o.version for o in model.opset_import}
        self.extra_opsets: dict[str, int] = {}
        self.count = itertools.count()
        self.nodes = 0
        self.bodies: dict[bytes, list[onnx.NodeProto]] = {}   # converted bodies by instance

    def expand(self, nodes: Iterable[onnx.NodeProto], stack: tuple[_Key, ...]) -> list[onnx.NodeProto]:
        out: list[onnx.NodeProto] = []
        for n in nodes:
            key = _key(n)
            if key in self.functions:
                out.extend(self._call(n, key, stack))
                continue
            if key[0] in self.function_domains and not _has_schema(key, self.opsets):
                caller = f"function {_label(stack[-1])}" if stack else "the graph"
                raise ModelLoadError(f"{self.where}: {caller} calls {_label(key)} (node {n.name or n.op_type}), "
                                     "which the model does not define")
            out.append(self._with_subgraphs(n, stack))
            self.nodes += 1
            if self.nodes > MAX_INLINED_NODES:
                raise ModelLoadError(f"{self.where}: inlining its functions makes more than {MAX_INLINED_NODES} nodes")
        return out

    def _with_subgraphs(self, n: onnx.NodeProto, stack: tuple[_Key, ...]) -> onnx.NodeProto:
        if not any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
            return n
        copy = onnx.NodeProto()
        copy.CopyFrom(n)
        for g in subgraphs(copy):
            expanded = self.expand(g.node, stack)
            del g.node[:]
            g.node.extend(expanded)
        return copy

    def _call(self, call: onnx.NodeProto, key: _Key, stack: tuple[_Key, ...]) -> list[onnx.NodeProto]:
        if key in stack:
            path = " -> ".join(_label(k) for k in (*stack[stack.index(key):], key))
            raise ModelLoadError(f"{self.where}: model-local functions call themselves: {path}")
        f = self.functions[key]
        body = self._body(f, call, key)
        prefix = f"{call.name or call.op_type}__{next(self.count)}/"
        names = dict(zip(f.input, call.input))
        names.update((o, "") for o in f.input[len(call.input):])
        names.update(zip(f.output, call.output))
        renamed = [_renamed(n, names, prefix) for n in body]
        return self.expand(renamed, (*stack, key))

    def _body(self, f: onnx.FunctionProto, call: onnx.NodeProto, key: _Key) -> list[onnx.NodeProto]:
        """The body with attribute references bound, in the model's opset versions."""
        values = {a.name: a for a in f.attribute_proto}
        values.update((a.name, a) for a in call.attribute)
        body = [_bound(n, values) for n in f.node]
        own = {_dom(o.domain): o.version for o in f.opset_import}
        for domain, version in own.items():
            self.extra_opsets.setdefault(domain, version)
        stale = [d for d, v in own.items() if d in self.opsets and v != self.opsets[d]
                 and not _same_schemas(body, d, v, self.opsets[d])]
        if not stale:
            return body
        if stale != [""]:
            raise ModelLoadError(f"{self.where}: function {_label(key)} imports {stale[0] or 'ai.onnx'} "
                                 f"version {own[stale[0]]}, the model {self.opsets[stale[0]]}, and its ops differ "
                                 "between them; graphexec converts only the default domain")
        return self._converted(f, body, key, own)

    def _converted(self, f: onnx.FunctionProto, body: list[onnx.NodeProto], key: _Key,
                   own: dict[str, int]) -> list[onnx.NodeProto]:
        g = onnx.helper.make_graph(body, f.name, [onnx.helper.make_value_info(i, onnx.TypeProto()) for i in f.input],
                                   [onnx.helper.make_value_info(o, onnx.TypeProto()) for o in f.output])
        m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in own.items()])
        m.ir_version = 8
        data = m.SerializeToString()
        if data not in self.bodies:
            try:
                converted = interruptible(lambda: version_converter.convert_version(m, self.opsets[""]),
                                          big=has_nodes(g, ASIDE_MIN_NODES))
            except Exception as e:   # the converter raises bare RuntimeError/ValidationError on what it lacks
                why = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise ModelLoadError(f"{self.where}: function {_label(key)} is written for opset {own['']} and "
                                     f"cannot be converted to the model's {self.opsets['']}: {why}") from None
            self.bodies[data] = list(converted.graph.node)
        return self.bodies[data]


def price(functions: dict[_Key, onnx.FunctionProto], graph: Iterable[onnx.NodeProto], where: str) -> int:
    """The node count inlining would give, worked out per function before anything is expanded
    (so a file whose calls double 30 times is refused at once): a call cycle, nesting deeper than
    MAX_FUNCTION_DEPTH or more than MAX_INLINED_NODES nodes is a ModelLoadError of its own.
    Iterative, so a chain of thousands of functions is no RecursionError."""
    calls = {k: _calls(f.node, functions) for k, f in functions.items()}
    size: dict[_Key, int] = {}
    depth: dict[_Key, int] = {}
    for root in calls:
        stack: list[tuple[_Key, Iterator[_Key]]] = [(root, iter(calls[root][1]))]
        path = [root]
        while stack:
            key, todo = stack[-1]
            nxt = next((c for c in todo if c not in size), None)
            if nxt is None:
                stack.pop()
                path.pop()
                own, callees = calls[key]
                size[key] = own + sum(size[c] for c in callees)
                depth[key] = 1 + max((depth[c] for c in set(callees)), default=0)
                continue
            if nxt in path:
                cycle = " -> ".join(_label(k) for k in (*path[path.index(nxt):], nxt))
                raise ModelLoadError(f"{where}: model-local functions call themselves: {cycle}")
            if len(path) >= MAX_FUNCTION_DEPTH:
                raise ModelLoadError(f"{where}: model-local functions nest more than {MAX_FUNCTION_DEPTH} calls "
                                     f"deep: {_chain(path, nxt)}")
            stack.append((nxt, iter(calls[nxt][1])))
            path.append(nxt)
    own, callees = _calls(graph, functions)
    total = own + sum(size[c] for c in callees)
    if total > MAX_INLINED_NODES:
        top = max(set(callees), key=lambda c: size[c])
        raise ModelLoadError(f"{where}: inlining its functions would make {total:,} nodes, more than "
                             f"{MAX_INLINED_NODES:,} (function {_label(top)} alone expands to {size[top]:,})")
    return total


def _chain(path: list[_Key], nxt: _Key) -> str:
    keys = [*path, nxt]
    shown = [_label(k) for k in keys[:3]] + ["..."] + [_label(k) for k in keys[-2:]]
    return " -> ".join(shown)


def _calls(nodes: Iterable[onnx.NodeProto], functions: dict[_Key, onnx.FunctionProto]) -> tuple[int, list[_Key]]:
    """(nodes that are no call, the calls in order) of a body, its subgraphs included."""
    own, callees = 0, []
    for n in all_nodes(nodes):
        key = _key(n)
        if key in functions:
            callees.append(key)
        else:
            own += 1
    return own, callees


def _has_schema(key: _Key, opsets: dict[str, int]) -> bool:
    return defs.has(key[1], key[0]) if key[0] in opsets else False


def _same_schemas(body: list[onnx.NodeProto], domain: str, a: int, b: int) -> bool:
    """True if every op of ``domain`` in ``body`` has the same schema at versions a and b."""
    for n in all_nodes(body):
        if _dom(n.domain) != domain or not defs.has(n.op_type, domain):
            continue
        try:
            if defs.get_schema(n.op_type, a, domain).since_version \
                    != defs.get_schema(n.op_type, b, domain).since_version:
                return False
        except defs.SchemaError:
            return False
    return True


def _bound(n: onnx.NodeProto, values: dict[str, onnx.AttributeProto]) -> onnx.NodeProto:
    """``n`` with each attribute reference replaced by the value it names (dropped if none)."""
    copy = onnx.NodeProto()
    copy.CopyFrom(n)
    attrs = []
    for a in copy.attribute:
        if a.ref_attr_name:
            if a.ref_attr_name not in values:
                continue
            v = onnx.AttributeProto()
            v.CopyFrom(values[a.ref_attr_name])
            v.name = a.name
            a = v
        for g in _subgraphs_of_attr(a):
            bound = [_bound(m, values) for m in g.node]
            del g.node[:]
            g.node.extend(bound)
        attrs.append(a)
    del copy.attribute[:]
    copy.attribute.extend(attrs)
    return copy


def _subgraphs_of_attr(a: onnx.AttributeProto) -> list[onnx.GraphProto]:
    if a.type == onnx.AttributeProto.GRAPH:
        return [a.g]
    return list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else []


def _renamed(n: onnx.NodeProto, names: dict[str, str], prefix: str) -> onnx.NodeProto:
    """A body node with formal names bound to the call's and every other name prefixed."""
    def ren(name: str) -> str:
        return names.get(name, prefix + name) if name else ""

    copy = onnx.NodeProto()
    copy.CopyFrom(n)
    copy.name = prefix + (n.name or n.op_type)
    copy.input[:] = [ren(i) for i in n.input]
    copy.output[:] = [ren(o) for o in n.output]
    for g in subgraphs(copy):
        _rename_graph(g, ren)
    return copy


def _rename_graph(g: onnx.GraphProto, ren: Callable[[str], str]) -> None:
    for vi in itertools.chain(g.input, g.output, g.value_info):
        vi.name = ren(vi.name)
    for t in g.initializer:
        t.name = ren(t.name)
    for n in g.node:
        n.name = ren(n.name or n.op_type)
        n.input[:] = [ren(i) for i in n.input]
        n.output[:] = [ren(o) for o in n.output]
        for sub in subgraphs(n):
            _rename_graph(sub, ren)
