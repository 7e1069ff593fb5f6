"""Issue 21's classes 5-7 through the API (round_two_api.py): each call raises its exact
line; conftest counts them per class with the command-line cases."""

from __future__ import annotations

import pytest

from hardening.round_two_api import API


@pytest.mark.parametrize("case", API, ids=[c.name for c in API])
def test_issue_21_case_api_raises_its_line(case):
    with pytest.raises(case.error) as err:
        case.call()
    assert str(err.value) == case.message


def test_every_api_class_has_its_cases():
    counts = {cls: sum(c.cls == cls for c in API) for cls in ("wrong answers", "hangs", "runtime faults")}
    assert all(n >= 5 for n in counts.values()), counts
