"""The profiler writes the exporter's files; several cards copy over their links."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

import graphexec.npu as npu
from graphexec.errors import DeviceError


def test_profile_writes_an_msprof_folder_of_the_block(tmp_path):
    x = npu.ones(64, 64)
    npu.synchronize()
    with npu.profiler.profile(tmp_path) as prof:
        y = npu.ops.relu(x @ x) + 1
        y.numpy()
    assert prof.path is not None and prof.path.parent == tmp_path and prof.path.name.startswith("PROF_")
    summary = list(prof.path.rglob("op_summary*.csv"))
    assert summary
    rows = list(csv.DictReader(open(summary[0])))
    assert [r["OP Type"] for r in rows] == ["MatMul", "Relu", "Add", "MemcpyAsync"]   # the block's work only
    assert {r["Model Name"] for r in rows} == {"eager"} and rows[0]["Task Type"] == "AI_CORE"
    timelines = list(prof.path.rglob("msprof*.json"))
    assert timelines and json.load(open(timelines[0]))


def test_devices_of_a_system_and_peer_copies():
    npu.init(system="atlas800-910")
    assert npu.device_count() == 8 and npu.current_device() == 0
    a = npu.tensor(np.arange(8, dtype=np.float32))
    b = a.to("npu:1")
    assert b.device == "npu:1"
    npu.set_device(1)
    c = b * 2                                  # on npu:1's current stream, after the copy's event
    assert npu.current_stream().device == "npu:1"
    np.testing.assert_array_equal(c.numpy(), np.arange(8) * 2)
    npu.synchronize(0)
    copies = [t for t in npu.timeline(0) if t["kind"] == "memcpy" and t["link"] is not None]
    assert copies and copies[0]["link"] == "HCCS"
    with pytest.raises(DeviceError):
        npu.set_device("cpu")


def test_cards_without_a_system_share_no_links():
    npu.init(device_count=2)
    with pytest.raises(DeviceError, match="share no links"):
        npu.ones(2).to("npu:1")
