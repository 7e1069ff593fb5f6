"""Fuzzing: mutated ONNX bytes and YAML documents go through the whole pipeline (load, and
for what loads, a run on default feeds); the only exception allowed is a GraphExecError,
and no case may hang (hypothesis's per-example deadline, plus a wall-clock guard).

CI tries a fixed (derandomized) set of 3,200 cases; ``pytest --long`` ten times as
many fresh ones. Every crash found became a fix and a case in test_corpus.py (the ACL
runtime has its own fuzzer and cases in test_fuzz_acl.py).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import onnx
import yaml
from onnx import helper
from hypothesis import given
from hypothesis import strategies as st

import graphexec as gx
from graphexec.frontend.convert import yaml_data, yaml_text
from graphexec.frontend.yaml import loads_yaml
from hardening import bad_inputs as B
from hardening.guard import deadline

ROOT = Path(__file__).resolve().parents[2]
SMALL = B.small_device()  # fuzzed dims that grow past 64 MiB stop at the size check, fast
WALL_S = 30              # the guard: a case that takes this long hangs
ONNX_SEEDS = [m.SerializeToString() for m in B.small_models().values()] + [B.nested_ifs(3).SerializeToString()]
YAML_TEXTS = [p.read_text() for p in sorted((ROOT / "models").glob("*.yaml"))] + [B.RELU_YAML] + [
    yaml_text(yaml_data(gx.load(m))[0]) for m in B.small_models().values()]
YAML_DOCS = [yaml.safe_load(t) for t in YAML_TEXTS]


def pipeline(load: Callable[[], gx.Graph]) -> None:
    """Load, then run on default feeds; anything but a one-line GraphExecError fails the case."""
    with deadline(WALL_S, "one fuzz case"):
        try:
            graph = load()
            gx.Session(graph, device=SMALL).run(gx.default_feeds(graph, device=SMALL))
        except gx.GraphExecError as e:
            assert str(e) and "\n" not in str(e)


# ---- ONNX bytes ----------------------------------------------------------------------
@st.composite
def onnx_mutants(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(ONNX_SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "flip", "byte", "insert", "delete", "truncate"]))
        if kind == "truncate":
            del data[i:]
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[i:i + draw(st.integers(1, 8))]
        elif i < len(data):
            data[i] = (data[i] ^ (1 << draw(st.integers(0, 7)))) if kind == "flip" else draw(st.integers(0, 255))
    return bytes(data)


def test_fuzz_onnx_bytes(budget):
    @budget(1000)
    @given(onnx_mutants())
    def case(data: bytes) -> None:
        pipeline(lambda: gx.load(data))
    case()


# ---- ONNX fields (most byte mutants do not parse; these do, and reach the kernels) -------
HOSTILE = st.integers(-3, 8) | st.sampled_from([0, -1, 300, 2**31, 2**40, 2**62, -(2**63)])
OPS = ["Add", "Cast", "Concat", "ConstantOfShape", "Conv", "Einsum", "Expand", "Flatten", "Gather", "Gemm", "If",
       "Loop", "MatMul", "MaxPool", "NonZero", "Pad", "Range", "ReduceSum", "Relu", "Reshape", "Resize", "Shape",
       "Slice", "Softmax", "Split", "Tile", "TopK", "Transpose", "Unsqueeze", "Where", "Frobnicate"]


def _mutate_node(draw: st.DrawFn, node: onnx.NodeProto, names: list[str]) -> None:
    kind = draw(st.sampled_from(["op", "input", "output", "attr", "new_attr"]))
    if kind == "op":
        node.op_type = draw(st.sampled_from(OPS))
    elif kind in ("input", "output"):
        field = node.input if kind == "input" else node.output
        j = draw(st.integers(0, len(field)))
        name = draw(st.sampled_from(names))
        field.append(name) if j == len(field) else field.__setitem__(j, name)
    elif kind == "attr" and node.attribute:
        a = node.attribute[draw(st.integers(0, len(node.attribute) - 1))]
        if a.type == onnx.AttributeProto.INT:
            a.i = draw(HOSTILE)
        elif a.type == onnx.AttributeProto.INTS:
            a.ints[:] = draw(st.lists(HOSTILE, max_size=5))
    else:
        name = draw(st.sampled_from(["axis", "perm", "keepdims", "group", "pads", "to", "axes"]))
        node.attribute.append(helper.make_attribute(name, draw(HOSTILE | st.lists(HOSTILE, min_size=1, max_size=4))))


@st.composite
def proto_mutants(draw: st.DrawFn) -> bytes:
    model = onnx.ModelProto.FromString(draw(st.sampled_from(ONNX_SEEDS)))
    g = model.graph
    names = sorted({n for nd in g.node for n in (*nd.input, *nd.output)} | {v.name for v in g.input}) + [""]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["node", "node", "node", "dim", "init_dim", "elem", "drop", "dup", "opset"]))
        values = [*g.input, *g.output]
        if kind == "node" and g.node:
            _mutate_node(draw, g.node[draw(st.integers(0, len(g.node) - 1))], names)
        elif kind == "dim":
            dims = draw(st.sampled_from(values)).type.tensor_type.shape.dim
            if dims:
                dims[draw(st.integers(0, len(dims) - 1))].dim_value = draw(HOSTILE)
        elif kind == "init_dim" and g.initializer:
            t = g.initializer[draw(st.integers(0, len(g.initializer) - 1))]
            t.dims[:] = draw(st.lists(HOSTILE, max_size=3))
        elif kind == "elem":
            draw(st.sampled_from(values)).type.tensor_type.elem_type = draw(st.integers(0, 30))
        elif kind in ("drop", "dup") and g.node:
            j = draw(st.integers(0, len(g.node) - 1))
            if kind == "drop":
                del g.node[j]
            else:
                g.node.add().CopyFrom(g.node[j])
        elif kind == "opset":
            model.opset_import[0].version = draw(st.integers(1, 30))
    return model.SerializeToString()


def test_fuzz_onnx_fields(budget):
    @budget(1000)
    @given(proto_mutants())
    def case(data: bytes) -> None:
        pipeline(lambda: gx.load(data))
    case()


# ---- YAML documents ------------------------------------------------------------------
def _paths(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``doc`` (iteratively: documents can be deep)."""
    out, stack = [], [(doc, path)]
    while stack:
        node, p = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append(p + (k,))
            stack.append((v, p + (k,)))
    return sorted(out, key=repr)


def _strings(doc: Any) -> list[str]:
    return sorted({s for s in map(lambda p: _get(doc, p), _paths(doc)) if isinstance(s, str)}) or ["x"]


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _values(doc: Any) -> st.SearchStrategy:
    """Replacement values: wrong types, hostile numbers, and names that exist elsewhere in the doc."""
    small = st.integers(-3, 300) | st.sampled_from([0, 2**31, 2**40, 2**63, -(2**63)])
    return st.one_of(st.none(), st.booleans(), small, st.floats(), st.text(max_size=6),
                     st.lists(small, max_size=4), st.dictionaries(st.sampled_from(["dtype", "shape", "value", "x"]),
                                                                 small, max_size=2),
                     st.sampled_from(_strings(doc)), st.lists(st.sampled_from(_strings(doc)), max_size=3))


@st.composite
def yaml_mutants(draw: st.DrawFn) -> str:
    doc = copy.deepcopy(draw(st.sampled_from(YAML_DOCS)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _get(doc, path[:-1]), path[-1]
        kind = draw(st.sampled_from(["delete", "replace", "replace", "shuffle", "duplicate"]))
        if kind == "delete":
            del parent[key]
        elif kind == "replace":
            parent[key] = draw(_values(doc))
        elif kind == "shuffle" and isinstance(parent[key], list):
            parent[key] = draw(st.permutations(parent[key]))
        elif kind == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
    return yaml.safe_dump(doc, sort_keys=False)


@st.composite
def yaml_text_mutants(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(YAML_TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["truncate", "insert", "delete", "dup_line"]))
        if kind == "truncate":
            text = text[:i]
        elif kind == "insert":
            text = text[:i] + draw(st.text(alphabet=":-[]{},#&*!|>'\"%@`? \n\t0aZ", min_size=1, max_size=4)) + text[i:]
        elif kind == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 20)):]
        else:
            lines = text.splitlines(keepends=True) or [""]
            j = min(i, len(lines) - 1)
            text = "".join(lines[:j + 1] + lines[j:])
    return text


def test_fuzz_yaml_documents(budget):
    @budget(800)
    @given(yaml_mutants())
    def case(text: str) -> None:
        pipeline(lambda: loads_yaml(text, "fuzz.yaml", ROOT / "models"))
    case()


def test_fuzz_yaml_text(budget):
    @budget(400)
    @given(yaml_text_mutants())
    def case(text: str) -> None:
        pipeline(lambda: loads_yaml(text, "fuzz.yaml", ROOT / "models"))
    case()
