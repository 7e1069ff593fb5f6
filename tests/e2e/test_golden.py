"""The compiled plan, schedule, memory plan, outputs, stats and trace of every light model
and node-test model are bit-identical to those recorded before the plan became a frozen
value (``tests/golden.py``)."""

from __future__ import annotations

import json

import pytest

import golden

RECORDED = json.loads(golden.DATA.read_text())
CASES = list(golden.all_cases())
ORACLES = json.loads(golden.ORACLES.read_text())
ORACLES_NOW = golden.oracle_digests()


def test_every_recorded_case_is_still_collected():
    assert sorted(name for name, *_ in CASES) == sorted(RECORDED)


@pytest.mark.parametrize("name,model,streams,feeds", CASES, ids=[c[0] for c in CASES])
def test_bit_identical_to_recording(name, model, streams, feeds):
    test = name.split("/")[1]
    if name.startswith("node/"):
        if golden.ml_dtypes_dependent(test) and golden.ml_dtypes_version() != ORACLES["ml_dtypes"]:
            pytest.skip(f"{test}: recorded with ml_dtypes {ORACLES['ml_dtypes']}, whose int2/int4 casts "
                        f"differ from {golden.ml_dtypes_version()}'s")
        if ORACLES_NOW[test] != ORACLES["inputs"][test]:
            pytest.fail(f"{test}: onnx now generates other inputs for it than when it was recorded; "
                        "the recording cannot be compared (re-record it deliberately)")
    assert golden.comparable(name, golden.digest_case(model, streams, feeds)) == RECORDED[name]
