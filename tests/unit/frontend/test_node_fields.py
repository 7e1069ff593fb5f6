"""The load's checks on fields read once (``fields_of``) against the same checks reading
the proto: the same refusal for a name that is not UTF-8 in the main graph, its outputs
and a subgraph; the same tensors, in the same order, as onnx's walk for external data;
the same schema problems."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx import external_data_helper as ext

from graphexec.errors import ModelLoadError
from graphexec.frontend.onnx_checks import (
    _all_tensors,
    check_no_external_data,
    check_text,
    fields_of,
    fields_problem,
    schema_problem,
)

F = TensorProto.FLOAT


def _const(name: str, out: str) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [out], name=name, value=numpy_helper.from_array(
        np.ones(2, "float32"), f"{name}_t"))


def _model() -> onnx.ModelProto:
    """An If whose branches hold initializers and Constant nodes, a Constant in the main graph
    and one in a model-local function: tensors in every place onnx's walk looks."""
    def branch(tag: str) -> onnx.GraphProto:
        init = numpy_helper.from_array(np.zeros(2, "float32"), f"{tag}_w")
        return helper.make_graph([_const(f"{tag}_c", f"{tag}_k"), helper.make_node("Add", [f"{tag}_k", f"{tag}_w"],
                                                                                   [f"{tag}_y"], name=f"{tag}_add")],
                                 f"{tag}_branch", [], [helper.make_tensor_value_info(f"{tag}_y", F, [2])], [init])
    nodes = [_const("main_c", "k"), helper.make_node("Greater", ["x", "k"], ["g"], name="gt"),
             helper.make_node("ReduceMin", ["g"], ["cond"], name="all", keepdims=0),
             helper.make_node("If", ["cond"], ["y"], name="nodeAA", then_branch=branch("thn"),
                              else_branch=branch("els"))]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", F, [2])],
                              [helper.make_tensor_value_info("y", F, [2])],
                              [numpy_helper.from_array(np.ones(2, "float32"), "top_w")])
    fn = helper.make_function("local", "f", ["a"], ["b"], [_const("fn_c", "b")], [helper.make_opsetid("", 17)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                             functions=[fn])


def test_tensors_come_in_onnx_walks_order():
    model = _model()
    attrs = [f[-1] for f in map(fields_of, model.graph.node)]
    assert [t.name for t in _all_tensors(model, attrs)] == [t.name for t in ext._get_all_tensors(model)]
    assert len(list(_all_tensors(model, attrs))) == 7   # 3 initializers, 4 Constant values
    check_no_external_data(model, "m", attrs)


def test_a_tensor_kept_outside_is_refused_either_way():
    model = _model()
    t = model.graph.node[3].attribute[0].g.node[0].attribute[0].t   # the else branch (attributes sort by name)
    ext.set_external_data(t, "w.bin")
    t.data_location = TensorProto.EXTERNAL
    messages = []
    for attrs in (None, [f[-1] for f in map(fields_of, model.graph.node)]):
        with pytest.raises(ModelLoadError) as e:
            check_no_external_data(model, "m", attrs)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "els_c_t" in messages[0]


@pytest.mark.parametrize("needle, spoiled", [(b"nodeAA", b"node\xff\xfe"), (b"\x12\x01y", b"\x12\x01\xf9"),
                                             (b"thn_add", b"thn_\xe0dd"), (b"else_branch", b"\x80lse_branch")])
def test_a_name_that_is_not_utf8_is_refused_the_same_way(needle, spoiled):
    data = _model().SerializeToString()
    assert data.count(needle) >= 1
    model = onnx.ModelProto()
    model.ParseFromString(data.replace(needle, spoiled, 1))
    messages = []
    for fields in (None, list(map(fields_of, model.graph.node))):
        with pytest.raises(ModelLoadError) as e:
            check_text(model, "m", fields)
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "is not UTF-8 text" in messages[0]


def test_schema_problems_of_fields_are_those_of_the_proto():
    opsets = {"": 17}
    nodes = [helper.make_node("Add", ["a"], ["b"]), helper.make_node("Relu", ["a"], ["b"], alpha=1.0),
             helper.make_node("Conv", ["x", ""], ["y"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Nope", ["a"], ["b"], domain="ai.onnx")]
    got = [fields_problem(*fields_of(n)[2:], opsets) for n in nodes]
    assert got == [schema_problem(n, opsets) for n in nodes]
    assert got[3] is None and got[0] and got[2]
