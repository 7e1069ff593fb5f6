"""Run the ONNX backend node tests through graphexec, judged as onnx's runner judges them."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import onnx
from onnx.backend.test.case.node import collect_testcases
from onnx.backend.test.runner import Runner

import graphexec as gx


@dataclass
class CaseResult:
    name: str
    ok: bool
    error: str = ""


def _normalize(t):
    return onnx.numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else t


def run_case(case) -> CaseResult:
    """Run every data set of one case; any exception or mismatch is a failure."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            session = gx.Session(gx.load(case.model))
            names = session.graph.inputs
            for inputs, ref_outputs in case.data_sets:
                feeds = dict(zip(names, [_normalize(x) for x in inputs]))
                outputs = list(session.run(feeds).outputs.values())
                Runner.assert_similar_outputs([_normalize(r) for r in ref_outputs], outputs,
                                              rtol=case.rtol, atol=case.atol)
        return CaseResult(case.name, True)
    except Exception as e:  # noqa: BLE001  (every failure is counted, not raised)
        return CaseResult(case.name, False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])


def collect():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return collect_testcases()


def run_all(cases=None) -> list[CaseResult]:
    return [run_case(c) for c in (cases if cases is not None else collect())]


if __name__ == "__main__":
    import sys
    import time

    t0 = time.time()
    results = run_all()
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"{r.name}\t{r.error}")
    print(f"{len(results) - len(failed)} of {len(results)} passed "
          f"({100 * (1 - len(failed) / len(results)):.2f}%) in {time.time() - t0:.0f} s", file=sys.stderr)
