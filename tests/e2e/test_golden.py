"""The compiled plan, schedule, memory plan, outputs, stats and trace of every light model
and node-test model are bit-identical to those recorded before the plan became a frozen
value (``tests/golden.py``)."""

from __future__ import annotations

import json

import pytest

import golden

RECORDED = json.loads(golden.DATA.read_text())
CASES = list(golden.all_cases())
ORACLES_THEN = json.loads(golden.ORACLES.read_text())
ORACLES_NOW = golden.oracle_digests()


def test_every_recorded_case_is_still_collected():
    assert sorted(name for name, *_ in CASES) == sorted(RECORDED)


@pytest.mark.parametrize("name,model,streams,feeds", CASES, ids=[c[0] for c in CASES])
def test_bit_identical_to_recording(name, model, streams, feeds):
    test = name.split("/")[1]
    if name.startswith("node/") and ORACLES_NOW[test] != ORACLES_THEN[test]:
        import ml_dtypes

        pytest.skip(f"{test}: onnx generates other data for it than when it was recorded "
                    f"(ml_dtypes {ml_dtypes.__version__} casts int2/int4 otherwise)")
    assert golden.comparable(name, golden.digest_case(model, streams, feeds)) == RECORDED[name]
