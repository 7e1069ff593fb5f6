"""Achieved, not peak, rates: block dim as CANN launches it, items looped in a block (wave
quantization), a per-block fixed cost, a per-item pipeline fill and an efficiency per dtype,
each checked against the formula worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from graphexec import acl
from graphexec.runtime.kernel_time import blocks, kernel_time
from graphexec.runtime.profiles import KernelModel, UnitKernels, load_profile

PEAK = 70.0e6 / 8   # ascend310p: cube float16 flops per us of one of its 8 cores


def _profile(split: int = 1, fixed: float = 1.0, fill: float = 0.5, eff: float = 0.5, **other):
    unit = UnitKernels(split=split, block_fixed_us=fixed, item_fill_us=fill, efficiency={"default": eff, **other})
    km = KernelModel(cube=unit, vector=unit, l2_bytes=1 << 20, l2_bandwidth_gbps=1000.0)
    return load_profile("ascend310p").model_copy(update={"kernels": km})


def test_fewer_tiles_than_cores_launch_one_block_per_tile():
    p = _profile()
    n, us, nbytes = kernel_time(p, "cube", "float16", 3 * PEAK, 300.0, 3)
    assert (n, nbytes) == (3, 100.0)
    assert us == pytest.approx(1.0 + 1 * (PEAK / (PEAK * 0.5) + 0.5))   # fixed + one item: 2 us of work + fill
    assert blocks(p, "cube", 3) == 3


def test_more_tiles_than_cores_loop_inside_the_blocks_and_quantize():
    p = _profile()
    flops = 20 * PEAK   # 20 items of 1 us of peak work each, on 8 cores: 3 rounds
    n, us, _ = kernel_time(p, "cube", "float16", flops, 0.0, 20)
    assert n == 8 and us == pytest.approx(1.0 + 3 * (2.0 + 0.5))
    n16, us16, _ = kernel_time(p, "cube", "float16", 16 * PEAK, 0.0, 16)
    n17, us17, _ = kernel_time(p, "cube", "float16", 17 * PEAK, 0.0, 17)
    assert (n16, n17) == (8, 8)
    assert us16 == pytest.approx(1.0 + 2 * 2.5) and us17 == pytest.approx(1.0 + 3 * 2.5)   # one tile more: a round more


def test_split_groups_tiles_into_items_and_efficiency_is_per_dtype():
    p = _profile(split=16, fill=0.0, float32=0.25)
    n, us, _ = kernel_time(p, "cube", "float16", 33 * PEAK, 0.0, 33)   # 33 fractals: 3 items of 11 us of peak work
    assert n == 3 and us == pytest.approx(1.0 + 11.0 / 0.5)
    per_core_fp32 = 35.0e6 / 8
    n, us, _ = kernel_time(p, "cube", "float32", 3 * per_core_fp32, 0.0, 33)
    assert n == 3 and us == pytest.approx(1.0 + 1.0 / 0.25)


def test_a_profile_without_a_kernel_model_keeps_the_plain_roofline():
    p = load_profile("ascend310p").model_copy(update={"kernels": None})
    assert kernel_time(p, "cube", "float16", 20 * PEAK, 2000.0, 20) == (20, 1.0, 100.0)
    assert kernel_time(p, "aicpu", "float32", 2e3, 0.0, 1)[1] == pytest.approx(1.0)


def test_the_simulated_kernel_takes_the_task_overhead_plus_its_blocks(fresh):
    p = _profile().model_copy(update={"hbm_bandwidth_gbps": 1e9})   # compute-bound
    acl.init(profile=p)
    acl.set_device(0)
    s = acl.create_stream()
    acl.launch_kernel(lambda: None, 20, s, flops=20 * PEAK, bytes=0.0, unit="cube", dtype="float16")
    acl.synchronize_stream(s)
    k = [t for t in acl.emulated_device().sim.finished if t.kind == "kernel"][0]
    assert k.end_t - k.start_t == pytest.approx(p.task_overhead_us + 1.0 + 3 * 2.5)
    assert k.max_cores == 8


def test_every_builtin_has_a_sourced_kernel_model():
    from graphexec.runtime.profiles import builtin_profiles

    for name, p in builtin_profiles().items():
        assert p.kernels is not None, name
        assert {"kernels.cube.efficiency.default", "kernels.l2_bytes"} <= set(p.sources), name


def test_a_block_with_one_item_reaches_lone_efficiency_of_its_rate():
    unit = UnitKernels(split=1, block_fixed_us=1.0, item_fill_us=0.5, efficiency={"default": 0.5},
                       lone_efficiency=0.5)
    km = KernelModel(cube=unit, vector=unit, l2_bytes=1 << 20, l2_bandwidth_gbps=1000.0)
    p = load_profile("ascend310p").model_copy(update={"kernels": km})
    # 3 items on 8 cores: one item per block, at 0.5 x 0.5 of the peak: 1 us of peak work takes 4 us
    assert kernel_time(p, "cube", "float16", 3 * PEAK, 0.0, 3)[1] == pytest.approx(1.0 + (4.0 + 0.5))
    # 20 items on 8 cores: 3 per block, a second one resident hides the loads: efficiency 0.5 alone
    assert kernel_time(p, "cube", "float16", 20 * PEAK, 0.0, 20)[1] == pytest.approx(1.0 + 3 * (2.0 + 0.5))
    # none set: a lone item runs at the plain efficiency
    plain = _profile()
    assert kernel_time(plain, "cube", "float16", 3 * PEAK, 0.0, 3)[1] == pytest.approx(1.0 + (2.0 + 0.5))


def test_an_op_class_with_its_own_efficiency_takes_it_in_place_of_the_dtype_one():
    from types import SimpleNamespace

    from graphexec.runtime.kernel_time import op_class

    unit = UnitKernels(split=1, block_fixed_us=0.0, item_fill_us=0.0, efficiency={"default": 0.5},
                       op_efficiency={"Conv": 0.25})
    km = KernelModel(cube=unit, vector=unit, l2_bytes=1 << 20, l2_bandwidth_gbps=1000.0)
    p = load_profile("ascend310p").model_copy(update={"kernels": km})
    conv = SimpleNamespace(node=SimpleNamespace(op="Conv"))
    fused = {"task": SimpleNamespace(node=SimpleNamespace(op="Conv+Relu"))}   # a fused kernel: its first op
    gemm = SimpleNamespace(node=SimpleNamespace(op="Gemm"))
    assert (op_class(conv), op_class(fused), op_class(gemm), op_class(None)) == ("Conv", "Conv", "Gemm", "")
    # 8 items of 1 us of peak work on 8 cores: 4 us at 0.25 (a Conv), 2 us at 0.5 (anything else)
    assert kernel_time(p, "cube", "float16", 8 * PEAK, 0.0, 8, conv)[1] == pytest.approx(4.0)
    assert kernel_time(p, "cube", "float16", 8 * PEAK, 0.0, 8, fused)[1] == pytest.approx(4.0)
    assert kernel_time(p, "cube", "float16", 8 * PEAK, 0.0, 8, gemm)[1] == pytest.approx(2.0)
    assert kernel_time(p, "cube", "float16", 8 * PEAK, 0.0, 8)[1] == pytest.approx(2.0)   # no meta: the dtype's


def test_a_compiled_conv_and_gemm_on_a_gpu_profile_take_their_own_efficiencies():
    import graphexec as gx

    v100 = load_profile("nvidia-v100")
    assert v100.kernels is not None and v100.kernels.cube.op_efficiency == {"Conv": 0.88}
    b = gx.GraphBuilder("cg")
    x = b.input("x", "float32", [64, 64, 32, 32])
    y = b.Conv(x, np.zeros((64, 64, 3, 3), np.float32), pads=[1, 1, 1, 1])
    b.output(b.Gemm(b.Reshape(y, np.array([64, -1], np.int64)), np.zeros((65536, 256), np.float32)))
    tasks = {t.node.op.split("+")[0]: t for t in gx.Session(b.build(), device=v100).compile().tasks.tasks
             if t.node is not None and t.unit == "cube"}
    peak = v100.unit_rate("cube", "float32")
    for op, eff in (("Conv", 0.88), ("Gemm", 0.98)):
        t = tasks[op]
        n, us, _ = kernel_time(v100, "cube", "float32", t.flops, 0.0, t.block_dim, t)
        items = -(-t.block_dim // 16)
        loops = -(-items // n)
        eff *= 0.75 if loops == 1 else 1.0   # lone_efficiency: one tile per SM
        assert us == pytest.approx(2.0 + loops * (t.flops / items / (peak * eff) + 1.0))


def test_task_time_remembers_per_cost_fields_and_meta_object():
    """The simulator's memo (``task_time``) gives kernel_time's numbers; a meta with an op
    class of its own, or the same fields under another meta object, is worked out anew."""
    from graphexec import _switch
    from graphexec.runtime.kernel_time import task_time
    from graphexec.runtime.sim import DeviceTask

    profile = load_profile("ascend910b")
    memo: dict = {}
    metas = [{}, {"task": None}, {}]
    tasks = [DeviceTask("kernel", None, "k", "vector", 4, 1e6, 4096.0, "float32", meta=m) for m in metas]
    tasks.append(DeviceTask("kernel", None, "k", "cube", 8, 3e7, 1e5, "float16", meta=metas[0]))
    for _ in range(2):
        for t in tasks:
            want = kernel_time(profile, t.unit, t.dtype, t.flops, t.bytes, t.block_dim, t.meta)
            assert task_time(memo, profile, t) == want
    assert len(memo) == 4 and all(entry[0] is t.meta for entry, t in zip(memo.values(), tasks))
    with _switch.plain():   # the plain reference: no memo
        assert task_time({}, profile, tasks[0]) == task_time(memo, profile, tasks[0])


@pytest.mark.parametrize("groups, cin_g, cout_g, padding", [
    (32, 1, 1, 16.0),       # depthwise: 16 groups merged into a 16-wide diagonal block: 16x
    (32, 8, 8, 2.0),        # ResNeXt's 8-wide groups: two merged into one 16-wide block, half of it zero
    (7, 24, 24, 16 / 7),    # RegNetX's 24-wide groups: two merged into 48 channels (2x), 7 groups in 4 blocks
    (2, 64, 64, 1.0),       # whole fractals: nothing padded
])
def test_a_grouped_conv_pays_cann_s_group_enlarge_on_a_profile_with_group_c0(groups, cin_g, cout_g, padding):
    import types

    from graphexec.runtime.kernel_time import group_padding

    task = types.SimpleNamespace(conv_groups=(groups, cin_g, cout_g))
    assert group_padding(task, 16) == pytest.approx(padding)
    assert group_padding({"task": task}, 16) == pytest.approx(padding)   # eager mode's meta
    p310 = load_profile("ascend310p")
    assert p310.kernels is not None and p310.kernels.cube.group_c0 == 16
    _, slow, _ = kernel_time(p310, "cube", "float16", 1e9, 0.0, 64, task)
    _, plain, _ = kernel_time(p310, "cube", "float16", 1e9, 0.0, 64, types.SimpleNamespace(conv_groups=()))
    km = p310.kernels.cube
    items = -(-64 // km.split)
    loops = -(-items // min(items, p310.ai_cores))
    fill = km.block_fixed_us + loops * km.item_fill_us
    assert slow - fill == pytest.approx((plain - fill) * padding)


def test_a_compiled_depthwise_conv_carries_its_groups_and_a_gpu_does_not_pad_them():
    import dataclasses

    import graphexec as gx

    b = gx.GraphBuilder("dw")
    x = b.input("x", "float16", [8, 64, 56, 56])
    b.output(b.Conv(x, np.zeros((64, 1, 3, 3), np.float16), group=64, pads=[1, 1, 1, 1]))
    t = next(t for t in gx.Session(b.build(), device="ascend310p").compile().tasks.tasks if t.unit == "cube")
    assert t.conv_groups == (64, 1, 1)
    a100 = load_profile("nvidia-a100")
    assert a100.kernels is not None and a100.kernels.cube.group_c0 is None
    ungrouped = dataclasses.replace(t, conv_groups=())
    assert kernel_time(a100, "cube", "float16", t.flops, 0.0, t.block_dim, t) == \
        kernel_time(a100, "cube", "float16", t.flops, 0.0, t.block_dim, ungrouped)
