"""The compiled plan, schedule, memory plan, outputs, stats and trace of every light model
and node-test model are bit-identical to those recorded before the plan became a frozen
value (``tests/golden.py``)."""

from __future__ import annotations

import json

import pytest

import golden

RECORDED = json.loads(golden.DATA.read_text())
CASES = list(golden.all_cases())


def test_every_recorded_case_is_still_collected():
    assert sorted(name for name, *_ in CASES) == sorted(RECORDED)


@pytest.mark.parametrize("name,model,streams,feeds", CASES, ids=[c[0] for c in CASES])
def test_bit_identical_to_recording(name, model, streams, feeds):
    assert golden.comparable(name, golden.digest_case(model, streams, feeds)) == RECORDED[name]
