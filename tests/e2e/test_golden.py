"""Every light model and node-test model compiles, schedules, plans memory and simulates exactly
as recorded, and computes outputs within golden_compare's tolerances of an outside oracle's
(``tests/golden.py``, ``tests/golden_oracle.py``). The quick tier runs a fixed sample of the cases
(``golden.in_sample``); ``pytest -m slow`` runs the rest."""

from __future__ import annotations

import golden
import golden_oracle
import pytest

CASES = list(golden.all_cases())


def test_every_recorded_case_is_still_collected():
    assert sorted(name for name, *_ in CASES) == sorted(golden.recording()[0])


def test_only_the_named_cases_lack_an_outside_oracle():
    """Every case's outputs are compared with onnx's expected outputs, onnxruntime's or
    onnx.reference's, but the seeded Bernoulli tests' (recorded, golden_oracle.NO_ORACLE), the
    unseeded ones' (random) and those of a case that raises (none)."""
    by_model = {golden.model_key(name): golden_oracle.which(name) for name, *_ in CASES}
    own = {m for m, kind in by_model.items() if kind == golden_oracle.RECORDED}
    assert own == {f"node/{t}" for t in golden_oracle.NO_ORACLE} == set(golden_oracle.recorded())
    assert {m for m, kind in by_model.items() if kind == golden_oracle.NO_VALUES} == {
        f"node/{t}" for t in golden_oracle.UNSEEDED}
    assert {f"node/{t}" for t in golden_oracle.LITERALS} <= by_model.keys()
    counts = golden.oracle_counts()
    assert counts[golden_oracle.ONNX_EXPECTED] > 0.95 * len(CASES), counts


def _param(case):
    marks = () if golden.in_sample(case[0]) else (pytest.mark.slow,)
    return pytest.param(*case, id=case[0], marks=marks)


@pytest.mark.parametrize("name,model,streams,feeds", [_param(c) for c in CASES])
def test_matches_recording_and_oracle(name, model, streams, feeds):
    assert golden.check(name, model, streams, feeds) == []
