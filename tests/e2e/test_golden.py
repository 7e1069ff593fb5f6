"""Every light model and node-test model compiles, schedules, plans memory and simulates exactly
as recorded, and computes outputs within golden_compare's tolerances of the recorded ones
(``tests/golden.py``). The quick tier runs a fixed sample of the cases (``golden.in_sample``);
``pytest -m slow`` runs the rest."""

from __future__ import annotations

import golden
import pytest

CASES = list(golden.all_cases())


def test_every_recorded_case_is_still_collected():
    assert sorted(name for name, *_ in CASES) == sorted(golden.recording()[0])


def _param(case):
    marks = () if golden.in_sample(case[0]) else (pytest.mark.slow,)
    return pytest.param(*case, id=case[0], marks=marks)


@pytest.mark.parametrize("name,model,streams,feeds", [_param(c) for c in CASES])
def test_matches_recording(name, model, streams, feeds):
    assert golden.check(name, model, streams, feeds) == []
