"""Where a DaVinci profile converts between NCHW and NC1HWC0 (``passes/layout.py``): the
graphs that get TransData tasks and the ones that do not, the numbers unchanged (checked
against onnxruntime), the conversion's cost, and none at all on a GPU."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import graphexec as gx
from graphexec.kernels.layout import padded_bytes
from graphexec.runtime.profiles import load_profile

mk = helper.make_node
RNG = np.random.default_rng(0)


def _c(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _model(nodes, shape, consts):
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _w(name, cout, cin, k=1):
    return _c(name, RNG.uniform(-1, 1, (cout, cin, k, k)).astype(np.float32))


def _run(model, shape, device="ascend310p"):
    """(TransData tasks as (src, dst, input shape), task graph), outputs checked against onnxruntime."""
    x = RNG.standard_normal(shape).astype(np.float32)
    session = gx.Session(model, device=device)
    got = session.run({"x": x}).outputs["y"]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    plan = session.compiled.plan
    trans = [(t.node.attrs["src_format"], t.node.attrs["dst_format"], plan.graph.values[t.reads[0]].type.shape)
             for t in plan.tasks.tasks if t.op == "TransData"]
    return trans, plan


def _shuffle(c):
    """Conv -> channel shuffle (Reshape, Transpose, Reshape) -> Conv, ShuffleNet's pattern."""
    nodes = [mk("Conv", ["x", "w1"], ["a"]), mk("Reshape", ["a", "s5"], ["r"]),
             mk("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]), mk("Reshape", ["t", "s4"], ["u"]),
             mk("Conv", ["u", "w2"], ["y"])]
    consts = [_w("w1", c, 8), _w("w2", 16, c), _c("s5", np.array([2, 2, c // 2, 6, 6], np.int64)),
              _c("s4", np.array([2, c, 6, 6], np.int64))]
    return _model(nodes, [2, 8, 6, 6], consts)


def test_a_channel_shuffle_converts_before_the_reshape_and_back_before_the_conv():
    trans, _ = _run(_shuffle(32), (2, 8, 6, 6))
    assert trans == [("NC1HWC0", "ND", (2, 32, 6, 6)), ("ND", "NC1HWC0", (2, 32, 6, 6))]


def test_a_gpu_converts_nothing():
    trans, plan = _run(_shuffle(32), (2, 8, 6, 6), device="nvidia-a100")
    assert trans == [] and all(t.op != "TransData" for t in plan.tasks.tasks)


def _concat(c1, c2):
    nodes = [mk("Conv", ["x", "w1"], ["a"]), mk("Conv", ["x", "w2"], ["b"]), mk("Concat", ["a", "b"], ["k"], axis=1),
             mk("Conv", ["k", "w3"], ["y"])]
    return _model(nodes, [2, 8, 5, 5], [_w("w1", c1, 8), _w("w2", c2, 8), _w("w3", 16, c1 + c2)])


def test_a_channel_concat_in_whole_c0_blocks_stays_in_5hd_and_an_unaligned_one_converts():
    assert _run(_concat(32, 16), (2, 8, 5, 5))[0] == []
    trans, _ = _run(_concat(58, 58), (2, 8, 5, 5))
    assert trans == [("NC1HWC0", "ND", (2, 58, 5, 5)), ("NC1HWC0", "ND", (2, 58, 5, 5)),
                     ("ND", "NC1HWC0", (2, 116, 5, 5))]


def test_one_conversion_serves_every_reader_and_elementwise_ops_follow_their_inputs():
    """Conv -> Relu (in 5HD) read by two Reshapes: one TransData for both."""
    nodes = [mk("Conv", ["x", "w1"], ["a"]), mk("Relu", ["a"], ["r"]), mk("Reshape", ["r", "s"], ["p"]),
             mk("Reshape", ["r", "s"], ["q"]), mk("Add", ["p", "q"], ["y"])]
    trans, _ = _run(_model(nodes, [2, 8, 4, 4], [_w("w1", 24, 8), _c("s", np.array([2, -1], np.int64))]), (2, 8, 4, 4))
    assert trans == [("NC1HWC0", "ND", (2, 24, 4, 4))]


def test_a_pooled_map_with_c0_dividing_c_is_flattened_without_a_conversion():
    """H = W = 1 and C0 | C: both layouts hold the same bytes; with C = 24 they do not."""
    def model(c):
        nodes = [mk("Conv", ["x", "w1"], ["a"]), mk("GlobalAveragePool", ["a"], ["g"]), mk("Flatten", ["g"], ["y"])]
        return _model(nodes, [2, 8, 4, 4], [_w("w1", c, 8)])
    assert _run(model(32), (2, 8, 4, 4))[0] == []
    assert _run(model(24), (2, 8, 4, 4))[0] == [("NC1HWC0", "ND", (2, 24, 1, 1))]


def test_the_conversion_moves_the_tensor_once_each_way_with_the_5hd_side_padded():
    """Without the kernel model (no L2 pass), a task's bytes are what it moves."""
    plain = load_profile("ascend310p").model_copy(update={"kernels": None})
    _, plan = _run(_shuffle(40), (2, 8, 6, 6), device=plain)
    nd = 2 * 40 * 6 * 6 * 2   # float16 under force_fp16
    task = next(t for t in plan.tasks.tasks if t.op == "TransData")
    assert padded_bytes((2, 40, 6, 6), nd, 16) == nd * 48 / 40
    assert task.unit == "vector" and task.bytes == nd + nd * 48 / 40


def _concat_run(c1, c2, device, streams=1):
    model, x = _concat(c1, c2), RNG.standard_normal((2, 8, 5, 5)).astype(np.float32)
    session = gx.Session(model, device=device, streams=streams, check_hazards=True)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for _ in range(2):   # the second run replays
        result = session.run({"x": x})
        np.testing.assert_allclose(result.outputs["y"], want, rtol=1e-4, atol=1e-4)
        assert result.stats.extra.get("hazards", []) == []
    return session.compiled.plan


def test_convolutions_write_a_c0_aligned_channel_concat_in_place_at_any_batch_on_5hd():
    """ConvConcatFusionPass (``layout.strided_concat``): at batch 2 the Concat launches nothing
    (each conv writes its strided slice, also from two streams, numbers and hazards checked); on a
    GPU, with unaligned channels and on the built-in 310P (where it is off) it runs."""
    p310 = load_profile("ascend310p")
    strided = p310.model_copy(update={"layout": p310.layout.model_copy(update={"strided_concat": True})})
    for streams in (1, 2):
        plan = _concat_run(32, 16, strided, streams)
        assert "Concat" not in [t.op for t in plan.tasks.tasks]
        assert plan.tasks.slots == {"a": (1, 0, 32), "b": (1, 32, 48)}
    assert "Concat" in [t.op for t in _concat_run(32, 16, "nvidia-a100").tasks.tasks]
    assert "Concat" in [t.op for t in _concat_run(24, 24, strided).tasks.tasks]
    assert "Concat" in [t.op for t in _concat_run(32, 16, "ascend310p").tasks.tasks]   # the built-in: off
