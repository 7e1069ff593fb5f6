"""Every eager-mode test starts from a fresh graphexec.npu (one ascend910 card)."""

from __future__ import annotations

import pytest

import graphexec.npu as npu


@pytest.fixture(autouse=True)
def fresh_npu(monkeypatch):
    monkeypatch.delenv("PYTORCH_NPU_ALLOC_CONF", raising=False)
    npu.init()
    npu.manual_seed(0)
    yield npu
    npu.init()
