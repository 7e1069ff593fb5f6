"""Fixtures for the runtime tests: a fresh ACL state per test, torn down even on failure
(``fresh`` comes from tests/unit/conftest.py)."""

from __future__ import annotations

import pytest
from acl_helpers import clean_acl

from graphexec import acl


@pytest.fixture
def rt():
    """acl initialized (hazard checking on) with device 0 set; finalized afterwards."""
    clean_acl()
    acl.init(check_hazards=True)
    acl.set_device(0)
    yield acl
    clean_acl()
