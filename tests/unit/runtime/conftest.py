"""Fixtures for the runtime tests: a fresh ACL state per test, torn down even on failure."""

from __future__ import annotations

import pytest

from graphexec import acl
from graphexec.acl._state import STATE


def _clean() -> None:
    if STATE.initialized:
        acl.finalize()


@pytest.fixture
def rt():
    """acl initialized (hazard checking on) with device 0 set; finalized afterwards."""
    _clean()
    acl.init(check_hazards=True)
    acl.set_device(0)
    yield acl
    _clean()


@pytest.fixture
def fresh():
    """No ACL state at all; finalized afterwards if the test initialized it."""
    _clean()
    yield acl
    _clean()
