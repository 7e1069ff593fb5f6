"""Fixtures for the runtime tests: a fresh ACL state per test, torn down even on failure
(``fresh`` comes from tests/unit/conftest.py)."""

from __future__ import annotations

import pytest
from acl_helpers import clean_acl
from test_sim_fast_reference import PlainSimulator

from graphexec import acl
from graphexec.runtime import device as device_mod
from graphexec.runtime import sim as sim_mod
from graphexec.runtime import sim_core


@pytest.fixture
def rt():
    """acl initialized (hazard checking on) with device 0 set; finalized afterwards."""
    clean_acl()
    acl.init(check_hazards=True)
    acl.set_device(0)
    yield acl
    clean_acl()


@pytest.fixture
def use(monkeypatch):
    """Switch which simulator new devices get: ``use("plain")`` (the frozen reference),
    ``use("fast")`` or ``use("steps")`` (one step per wave); the compiled loop only with "fast"."""
    def pick(kind: str) -> None:
        monkeypatch.setattr(sim_core, "CORE", sim_core.CORE and kind == "fast")
        monkeypatch.setattr(device_mod, "Simulator", PlainSimulator if kind == "plain" else sim_mod.Simulator)
        monkeypatch.setattr(sim_mod, "FAST_WAVES", kind == "fast")
    return pick
