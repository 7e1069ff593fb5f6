"""Fixtures for the HCCL tests: no ACL state at the start, finalized afterwards even on failure."""

from __future__ import annotations

import pytest

from graphexec import acl
from graphexec.acl._state import STATE


def _clean() -> None:
    if STATE.initialized:
        acl.finalize()


@pytest.fixture
def fresh():
    """No ACL state at all; finalized afterwards if the test initialized it."""
    _clean()
    yield acl
    _clean()
