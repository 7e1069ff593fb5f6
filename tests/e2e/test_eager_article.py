"""The runtime article's two PyTorch programs, with ``import torch, torch_npu`` replaced by
``import graphexec.npu as npu`` (seed article, the memory-pool and multi-stream sections)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import graphexec as gx
import graphexec.npu as npu

MODEL = Path(__file__).resolve().parents[2] / "models" / "inception_block.onnx"
MiB = 1024 * 1024


@pytest.fixture(autouse=True)
def fresh_npu(monkeypatch):
    monkeypatch.delenv("PYTORCH_NPU_ALLOC_CONF", raising=False)
    npu.init()
    yield
    npu.init()


def test_tensor_memory_comes_back_to_the_pool_when_collected():
    # PyTorch 的内存管理更简单，torch.npu 帮你自动处理
    a = npu.randn(1024, 1024)  # 自动分配 NPU 内存
    # PyTorch NPU tensor 不需要手动 free，GC 自动处理
    assert a.device == "npu:0" and npu.memory_allocated() == 4 * MiB
    reserved = npu.memory_reserved()
    assert reserved == 20 * MiB          # a 4 MiB request is cut from a 20 MiB segment
    ptr = a._store.ptr
    del a
    gc.collect()
    assert npu.memory_allocated() == 0 and npu.memory_reserved() == reserved   # the pool keeps the block
    b = npu.randn(1024, 1024)
    assert b._store.ptr == ptr and npu.memory_reserved() == reserved          # and hands it out again
    assert npu.memory_stats()["segment.all.allocated"] == 1


def load_next_batch() -> npu.Tensor:
    return npu.randn(1, 192, 28, 28, device="cpu")


def test_prefetch_on_stream_1_overlaps_compute_on_stream_0():
    model = npu.Module(gx.load(MODEL))
    current_input = load_next_batch().npu()
    model(current_input)          # the model is loaded (compiled, weights uploaded) before the loop
    npu.synchronize()
    before = len(npu.timeline())

    # PyTorch 多 Stream 并行示例
    npu.set_stream(npu.Stream(stream_id=0))  # Stream 0: 主计算

    # Stream 1: 预取下一批数据（在主计算的同时做）
    with npu.stream(npu.Stream(stream_id=1)):
        next_input = load_next_batch()  # 预取
        host_batch = next_input.numpy().copy()
        next_input = next_input.npu()   # 搬到 NPU

    # Stream 0: 主计算
    current_output = model(current_input)

    # 同步点：等主计算完成后才能用 next_input
    npu.synchronize()  # 或者 torch.npu.synchronize()

    tl = npu.timeline()[before:]
    copy = next(t for t in tl if t["kind"] == "memcpy" and t["stream"] == 1)
    compute = [t for t in tl if t["kind"] == "kernel" and t["stream"] == 0]
    first, last = min(t["start"] for t in compute), max(t["end"] for t in compute)
    assert copy["start"] < last and copy["end"] > first        # the copy overlaps stream 0's kernels
    assert copy["end"] - copy["start"] > 0 and last - first > 0

    # Stream 1 的数据已经就绪，可以开始下一轮计算
    assert next_input.device == "npu:0"
    assert next_input.numpy().tobytes() == host_batch.tobytes()
    ref = gx.Session(gx.load(MODEL)).run({"data": current_input.numpy()}).outputs["out"]
    assert current_output.numpy().tobytes() == ref.tobytes()
