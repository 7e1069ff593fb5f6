"""Model-local functions are inlined at load (frontend/onnx_functions.py): real torch exports
with ``export_modules_as_functions`` give the tasks of their inline export and onnxruntime's
outputs; hand-made models cover what torch does not write (attribute references with and
without defaults, a body in another opset, a call inside an If branch, overloads' neighbours);
an unresolvable function is one ModelLoadError line, exit 2 in the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import graphexec as gx
from graphexec.errors import ModelLoadError

ort = pytest.importorskip("onnxruntime")
ROOT = Path(__file__).resolve().parents[3]
FN, INLINE = ROOT / "models" / "functions_block.onnx", ROOT / "models" / "functions_block_inline.onnx"


def _ort(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    src = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)


def _ours(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray], streams: int = 1):   # type: ignore[no-untyped-def]
    return gx.Session(gx.load(model), streams=streams).run(feeds)


@pytest.mark.parametrize("streams", [1, 4])
def test_torch_functions_export_runs_as_its_inline_export(streams):
    x = np.random.default_rng(0).standard_normal((2, 5, 8)).astype(np.float32)
    assert len(onnx.load(str(FN)).functions) == 5   # Block twice, MLP, LayerNorm, GELU
    ours, inline = _ours(FN, {"x": x}, streams), _ours(INLINE, {"x": x}, streams)
    assert ours.stats.num_tasks == inline.stats.num_tasks
    np.testing.assert_allclose(ours.outputs["y"], _ort(FN, {"x": x})[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours.outputs["y"], inline.outputs["y"])


def test_loaded_graph_keeps_no_function_calls():
    graph = gx.load(FN)
    assert not graph.functions
    assert {n.domain for n in graph.nodes} <= {""}
    model = onnx.load(str(FN))
    gx.load(model)
    assert len(model.functions) == 5   # the caller's proto is not rewritten


def _ref(node: onnx.NodeProto, name: str, ref: str, kind: int) -> onnx.NodeProto:
    a = onnx.AttributeProto(name=name, ref_attr_name=ref, type=kind)
    node.attribute.append(a)
    return node


def _scale(opset: int) -> onnx.FunctionProto:
    """y = LeakyRelu(x * alpha, slope): alpha without a default, slope defaulting to 0.3."""
    const = _ref(h.make_node("Constant", [], ["c"]), "value_float", "alpha", onnx.AttributeProto.FLOAT)
    leaky = _ref(h.make_node("LeakyRelu", ["t"], ["y"]), "alpha", "slope", onnx.AttributeProto.FLOAT)
    f = h.make_function("my.dom", "Scale", ["x"], ["y"], [const, h.make_node("Mul", ["x", "c"], ["t"]), leaky],
                        [h.make_opsetid("", opset)], attributes=["alpha"])
    f.attribute_proto.append(h.make_attribute("slope", 0.3))
    return f


def _model(nodes: list[onnx.NodeProto], functions: list[onnx.FunctionProto]) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                     [h.make_tensor_value_info("z", T.FLOAT, [3, 4])])
    opsets = [h.make_opsetid("", 18), h.make_opsetid("my.dom", 1), h.make_opsetid("other", 1)]
    return h.make_model(g, opset_imports=opsets, functions=functions)


def _twice(opset: int) -> onnx.FunctionProto:
    """Calls Scale twice, with and without its defaulted attribute; listed before Scale."""
    return h.make_function("other", "Twice", ["x"], ["y"], [
        h.make_node("Scale", ["x"], ["a"], domain="my.dom", alpha=2.0, slope=0.1),
        h.make_node("Scale", ["a"], ["y"], domain="my.dom", alpha=-3.0),
    ], [h.make_opsetid("", opset), h.make_opsetid("my.dom", 1)])


@pytest.mark.parametrize("opset", [18, 13])   # 13: the body is converted to the model's 18
def test_nested_functions_with_attribute_references(opset):
    m = _model([h.make_node("Twice", ["x"], ["y"], domain="other"), h.make_node("Twice", ["y"], ["z"], domain="other")],
               [_twice(opset), _scale(opset)])
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    want = _ort(m, {"x": x})[0]
    np.testing.assert_allclose(_ours(m, {"x": x}).outputs["z"], want, rtol=1e-6)
    leaky = [n.attrs["alpha"] for n in gx.load(m).nodes if n.op == "LeakyRelu"]
    assert leaky == pytest.approx([0.1, 0.3, 0.1, 0.3])


def test_function_called_inside_an_if_branch():
    branch = h.make_graph([h.make_node("Scale", ["x"], ["b"], domain="my.dom", alpha=5.0)], "then", [],
                          [h.make_tensor_value_info("b", T.FLOAT, [3, 4])])
    other = h.make_graph([h.make_node("Neg", ["x"], ["n"])], "else", [],
                         [h.make_tensor_value_info("n", T.FLOAT, [3, 4])])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["z"], then_branch=branch, else_branch=other)]
    m = _model([h.make_node("Constant", [], ["zero"], value_float=0.0), *nodes], [_scale(18)])
    for sign in (1.0, -1.0):
        x = sign * np.abs(np.random.default_rng(2).standard_normal((3, 4))).astype(np.float32)
        np.testing.assert_allclose(_ours(m, {"x": x}).outputs["z"], _ort(m, {"x": x})[0], rtol=1e-6)


def test_unresolvable_functions_are_one_line_naming_them():
    a = h.make_function("d", "A", ["x"], ["y"], [h.make_node("B", ["x"], ["y"], domain="d")],
                        [h.make_opsetid("", 18), h.make_opsetid("d", 1)])
    b = h.make_function("d", "B", ["x"], ["y"], [h.make_node("A", ["x"], ["y"], domain="d")],
                        [h.make_opsetid("", 18), h.make_opsetid("d", 1)])
    g = h.make_graph([h.make_node("A", ["x"], ["z"], domain="d")], "g", [h.make_tensor_value_info("x", T.FLOAT, [3])],
                     [h.make_tensor_value_info("z", T.FLOAT, [3])])
    ops = [h.make_opsetid("", 18), h.make_opsetid("d", 1)]
    with pytest.raises(ModelLoadError, match=r"call themselves: d::A -> d::B -> d::A"):
        gx.load(h.make_model(g, opset_imports=ops, functions=[a, b]))
    with pytest.raises(ModelLoadError, match=r"function d::A calls d::B .*does not define"):
        gx.load(h.make_model(g, opset_imports=ops, functions=[a]))


def test_cli_exit_2_names_the_missing_function(tmp_path):
    a = h.make_function("d", "A", ["x"], ["y"], [h.make_node("Gone", ["x"], ["y"], domain="d")],
                        [h.make_opsetid("", 18), h.make_opsetid("d", 1)])
    g = h.make_graph([h.make_node("A", ["x"], ["z"], domain="d")], "g", [h.make_tensor_value_info("x", T.FLOAT, [3])],
                     [h.make_tensor_value_info("z", T.FLOAT, [3])])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18), h.make_opsetid("d", 1)], functions=[a]), str(path))
    p = subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", str(path)], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "d::Gone" in p.stderr and "d::A" in p.stderr
