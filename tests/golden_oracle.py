"""The outside oracles the golden tests hold graphexec's outputs to (within ``golden_compare``'s
tolerances), and which case has which (``which``).

- A node test: onnx's expected outputs, which onnx's test-case generator computes beside the
  inputs it makes (``collect_testcases``: the arrays ``backend-test-tools generate-data`` writes
  as ``output_*.pb``; neither the onnx wheel nor its repository ships those files any more).
  Inputs and expected outputs are made together, so the oracle holds under any ml_dtypes (whose
  int2/int4 casts change the cast tests' inputs) and any numpy. Four tests' expected values are
  literals typed to four decimals, which only onnx's runner's rtol of 1e-3 holds (``LITERALS``):
  they are compared with onnxruntime's outputs on the same inputs, or onnx.reference's where
  onnxruntime lacks the op.
- A light model: onnxruntime's outputs for the same feeds, and its logits (the model cut before its
  final Softmax, ``light_logits``).
- No oracle (``NO_ORACLE``): Bernoulli with a seed, whose expected draws come from numpy's generator,
  whose seed semantics graphexec's does not share (``node_known_failures.txt``); graphexec's draws
  are recorded in ``data/golden_self.json`` instead. Bernoulli without a seed (``UNSEEDED``) draws
  fresh numbers each run and has no values to compare, nor has a case that raises.
"""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any

import golden_compare
import light_logits
import numpy as np
import onnx

import graphexec as gx

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
SELF = Path(__file__).parent / "data" / "golden_self.json"
LOGITS = "<logits>"   # a light model's logits, compared beside its outputs (light_logits)

ONNX_EXPECTED, ONNXRUNTIME, ONNX_REFERENCE = "onnx expected outputs", "onnxruntime", "onnx.reference"
RECORDED, NO_VALUES = "recorded (no oracle)", "no values"
# onnx's expected values typed as 4-decimal literals (up to 1300 ulps from float32 work), and the
# oracle that computes them in full: onnxruntime, or onnx.reference where onnxruntime has no
# kernel (RoiAlign-22); graphexec runs GridSample through onnx.reference, so it gets onnxruntime
LITERALS = {
    "test_averagepool_2d_ceil_last_window_starts_on_pad": ONNXRUNTIME,
    "test_gridsample_bicubic": ONNXRUNTIME,
    "test_roialign_aligned_false": ONNX_REFERENCE,
    "test_roialign_aligned_true": ONNX_REFERENCE,
}
# Bernoulli with no seed draws fresh numbers each run, as the ONNX spec allows
UNSEEDED = {"test_bernoulli", "test_bernoulli_double", "test_bernoulli_double_expanded", "test_bernoulli_expanded"}
NO_ORACLE = {
    "test_bernoulli_seed": "onnx draws with numpy's generator, whose seed semantics graphexec's does not share",
    "test_bernoulli_seed_expanded": "the same draws through RandomUniformLike",
}


def test_of(case: str) -> str:
    """The model part of a case name: ``test_abs`` of ``node/test_abs/streams=1``."""
    return case.split("/")[1]


def which(case: str) -> str:
    """The oracle a case's outputs are compared with."""
    test = test_of(case)
    if case.startswith("light/"):
        return ONNXRUNTIME
    if test in UNSEEDED:
        return NO_VALUES
    if test in NO_ORACLE:
        return RECORDED
    return LITERALS.get(test, ONNX_EXPECTED)


@functools.cache
def node_tests() -> tuple[Any, ...]:
    """onnx's node test cases that have data, by name; collected once (about 10 s)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return tuple(sorted((c for c in collect_testcases() if c.data_sets), key=lambda c: c.name))


@functools.cache
def _node_test(test: str) -> Any:
    return next(c for c in node_tests() if c.name == test)


def to_arrays(values: list[Any]) -> list[Any]:
    """onnx's test values as graphexec takes and gives them: TensorProtos and numpy scalars as
    arrays, sequences item by item."""
    out = []
    for v in values:
        if isinstance(v, onnx.TensorProto):
            v = onnx.numpy_helper.to_array(v)
        out.append(np.asarray(v) if isinstance(v, np.generic) else to_arrays(v) if isinstance(v, list) else v)
    return out


def _flat(outputs: dict[str, Any]) -> dict[str, np.ndarray]:
    _, arrays = golden_compare.flatten(outputs)
    return {k: v for k, (_, v) in arrays.items()}


def expected(case: str, model: Any) -> dict[str, np.ndarray]:
    """The oracle's outputs for one case (``which``), as ``golden_compare.flatten`` keys them; a
    light model's logits under ``LOGITS`` where it ends in a Softmax. Computed once per model."""
    if case.startswith("light/"):
        return light_outputs(str(model))
    if which(case) == RECORDED:
        return recorded()[case.rsplit("/", 1)[0]]
    return _node_outputs(test_of(case), which(case))


@functools.cache
def _node_outputs(test: str, kind: str) -> dict[str, np.ndarray]:
    node = _node_test(test)
    if kind == ONNX_EXPECTED:
        return _flat(dict(zip([o.name for o in node.model.graph.output], to_arrays(node.data_sets[0][1]))))
    feeds = to_arrays(node.data_sets[0][0])
    if kind == ONNXRUNTIME:
        return _flat(_ort_run(node.model.SerializeToString(), feeds))
    if kind == ONNX_REFERENCE:
        return reference_outputs(node.model, feeds)
    raise ValueError(f"{test}: no values to compare ({kind})")


def _ort_session(model: str | bytes) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1   # one thread: the same sums on any machine, and 2 cores shared
    opts.log_severity_level = 3     # the light models' unused initializers warn otherwise
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def _ort_run(model: str | bytes, feeds: dict[str, Any] | list[Any]) -> dict[str, Any]:
    """onnxruntime's outputs by name; feeds by name, or a list in the model's input order."""
    session = _ort_session(model)
    if isinstance(feeds, list):
        feeds = dict(zip([i.name for i in session.get_inputs()], feeds))
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def light_feeds(graph: gx.Graph) -> dict[str, np.ndarray]:
    """A light model's one input: arange(n)/n in its shape (symbolic dims 1), as onnx's recorded
    outputs were made."""
    name = graph.inputs[0]
    shape = [d if isinstance(d, int) else 1 for d in graph.values[name].type.shape]
    n = int(np.prod(shape))
    return {name: (np.arange(n, dtype=np.float32).reshape(shape) / n).astype(np.float32)}


@functools.cache
def light_outputs(path: str) -> dict[str, np.ndarray]:
    """onnxruntime's outputs of a light model for ``light_feeds``, and its logits where the model
    ends in a Softmax; one onnxruntime session per model and process."""
    feeds = light_feeds(gx.load(path))
    out = _flat(_ort_run(path, feeds))
    cut = light_logits.logits_model(path)
    if cut is not None:
        out[LOGITS] = next(iter(_ort_run(cut.SerializeToString(), feeds).values()))
    return out


def reference_outputs(model: onnx.ModelProto, feeds: list[Any]) -> dict[str, np.ndarray]:
    """The outputs onnx's reference evaluator gives for the feeds."""
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        ref = ReferenceEvaluator(model)
        values = ref.run(None, dict(zip(ref.input_names, feeds)))
    return _flat(dict(zip(ref.output_names, to_arrays(values))))


@functools.cache
def recorded() -> dict[str, dict[str, np.ndarray]]:
    """graphexec's own outputs for the ``NO_ORACLE`` models, as ``record_self`` wrote them."""
    data = json.loads(SELF.read_text())["outputs"]
    return {model: {k: np.asarray(v["values"], dtype=v["dtype"]).reshape(v["shape"]) for k, v in outs.items()}
            for model, outs in data.items()}


def record_self(outputs: dict[str, dict[str, np.ndarray]]) -> None:
    """Write graphexec's outputs for the ``NO_ORACLE`` models (model -> output -> values) as JSON."""
    data = {"why": {t: why for t, why in sorted(NO_ORACLE.items())},
            "outputs": {model: {k: {"dtype": str(v.dtype), "shape": list(v.shape), "values": v.ravel().tolist()}
                                for k, v in sorted(outs.items())} for model, outs in sorted(outputs.items())}}
    SELF.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
