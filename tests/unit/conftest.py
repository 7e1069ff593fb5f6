"""Fixtures shared by the unit tests that drive the ACL runtime (runtime/, hccl/)."""

from __future__ import annotations

import pytest
from acl_helpers import clean_acl

from graphexec import acl


@pytest.fixture
def fresh():
    """No ACL state at all; finalized afterwards if the test initialized it."""
    clean_acl()
    yield acl
    clean_acl()
