"""Outside oracles: the ONNX backend node tests and the light models shipped with onnx."""

from __future__ import annotations

import glob
import os
import warnings
from pathlib import Path

import golden
import golden_compare
import light_logits
import numpy as np
import onnx
import pytest
from node_suite import collect, run_case

import graphexec as gx

KNOWN = Path(__file__).with_name("node_known_failures.txt")
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _known_failures() -> dict[str, str]:
    known = {}
    for line in KNOWN.read_text().splitlines():
        name, _, why = line.partition("#")
        if name.strip():
            known[name.strip()] = why.strip()
    return known


def test_node_conformance():
    """At least 99.5% of the node tests pass, and nothing outside the known list fails.

    The test extras add nothing a node test needs (Pillow, for ImageDecoder, is a
    dependency), so the rate is the same in a plain ``pip install -e .``."""
    results = [run_case(c) for c in collect()]
    failed = {r.name: r.error for r in results if not r.ok}
    known = _known_failures()
    rate = 1 - len(failed) / len(results)
    print(f"\nONNX node tests: {len(results) - len(failed)} of {len(results)} pass ({100 * rate:.2f}%)")
    fixed = sorted(set(known) - set(failed))
    if fixed:
        warnings.warn(f"now passing, remove from {KNOWN.name}: {', '.join(fixed)}")
    regressions = {n: e for n, e in failed.items() if n not in known}
    assert not regressions, f"new failures: {regressions}"
    assert rate >= 0.995


def test_node_conformance_sample():
    """The quick tier's share of the node tests (the golden sample's hash on their names): nothing
    outside the known list fails. The slow tier runs them all (test_node_conformance)."""
    cases = [c for c in collect() if golden.in_sample(f"node/{c.name}/streams=1")]
    failed = {r.name: r.error for r in (run_case(c) for c in cases) if not r.ok}
    assert len(cases) > 50
    assert not {n: e for n, e in failed.items() if n not in _known_failures()}


LIGHT_MODELS = sorted(glob.glob(str(LIGHT / "*.onnx")))


@pytest.mark.parametrize("path", LIGHT_MODELS, ids=[os.path.basename(p)[6:-5] for p in LIGHT_MODELS])
def test_light_model(path):
    """Each light model matches its expected output for the input arange(n)/n; one that ends in a
    Softmax over logits float32 cannot determine (light_logits) matches onnxruntime's logits
    instead, and its output is a distribution."""
    graph = gx.load(path)
    shape = graph.values[graph.inputs[0]].type.shape
    n = int(np.prod(shape))
    x = (np.arange(n).reshape(shape) / n).astype(np.float32)
    result = gx.Session(graph).run({graph.inputs[0]: x})
    expected = onnx.numpy_helper.to_array(onnx.load_tensor(path.replace(".onnx", "_output_0.pb")))
    out = next(iter(result.outputs.values()))
    assert result.stats.makespan_us > 0
    cut = light_logits.logits_model(path)
    if cut is not None:
        import onnxruntime as ort

        ref = ort.InferenceSession(cut.SerializeToString(), providers=["CPUExecutionProvider"])
        ort_logits = ref.run(None, {graph.inputs[0]: x})[0]
        ours = light_logits.logits(cut, {graph.inputs[0]: x})
        assert golden_compare.close(ours, ort_logits, "float32", golden_compare.ACCUMULATE) is None
        assert light_logits.distribution_problem(out) is None
        if not light_logits.determined(ort_logits):
            return
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-4)
