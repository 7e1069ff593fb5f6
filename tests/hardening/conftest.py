"""The fuzzers' budget: ``budget(n)`` is hypothesis settings for n cases in CI, 10x with --long."""

from __future__ import annotations

from datetime import timedelta
from typing import Callable

import pytest
from hypothesis import HealthCheck, settings

EXAMPLE_S = 5  # hypothesis's deadline for one case (well above the ~50 ms a case takes)


@pytest.fixture
def budget(request: pytest.FixtureRequest) -> Callable[[int], settings]:
    """hypothesis settings for ``n`` CI cases, derandomized (10x and fresh with --long)."""
    long = request.config.getoption("--long")
    return lambda n: settings(max_examples=n * 10 if long else n, derandomize=not long, database=None,
                              deadline=timedelta(seconds=EXAMPLE_S), print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


HOST_BUDGET = 8 << 30  # bytes: the messages name the budget, so every machine gets the same one


@pytest.fixture(autouse=True)
def host_budget(monkeypatch: pytest.MonkeyPatch) -> int:
    """GRAPHEXEC_HOST_BUDGET fixed for the hardening tests, whatever this machine's memory."""
    monkeypatch.setenv("GRAPHEXEC_HOST_BUDGET", str(HOST_BUDGET))
    return HOST_BUDGET


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The corpus report: how many cases each class of issues 21 and 39 holds, and how many passed."""
    from hardening.round_three import CORPUS
    from hardening.round_three_acl import ACL
    from hardening.round_three_frontend import FRONTEND
    from hardening.round_two import ROUND_TWO
    from hardening.round_two_api import API

    for issue, cases in ((21, [*ROUND_TWO, *API]), (39, [*CORPUS, *ACL, *FRONTEND])):
        _report(terminalreporter, issue, cases)


def _report(terminalreporter: pytest.TerminalReporter, issue: int, cases: list) -> None:
    outcome = {r.nodeid.rsplit("[", 1)[-1].rstrip("]"): r.outcome
               for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])
               if f"test_issue_{issue}_case" in r.nodeid and r.when == "call"}
    if not outcome:
        return
    terminalreporter.write_sep("-", f"bad-input corpus by class (issue {issue})")
    for cls in dict.fromkeys(c.cls for c in cases):
        names = [c.name for c in cases if c.cls == cls]
        passed = sum(outcome.get(n) == "passed" for n in names)
        codes = sorted({c.rc for c in cases if c.cls == cls and c.rc is not None})
        terminalreporter.write_line(f"{cls:14s} {len(names):3d} cases, {passed} passed, "
                                    + (f"exit codes {codes}" if codes else "through the API"))
