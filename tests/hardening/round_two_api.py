"""Issue 21's classes 5-7 through the Python API, each case with its exact line: wrong
answers (feeds that do not convert), hangs (costs that never end, loops that never
stop) and runtime faults (the device after a fault). A case calls the API and must
raise ``error`` whose text is ``message``; the corpus report counts them with the rest."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
from loop_models import runaway_loop

import graphexec as gx
from graphexec import acl
from graphexec.errors import AclError, FeedError, GraphError, KernelError, OutOfMemoryError
from graphexec.runtime.profiles import load_profile


class ApiCase(NamedTuple):
    cls: str
    name: str
    call: Callable[[], Any]
    error: type
    message: str
    rc: None = None   # no process: the report says "api"


def _add(dtype: str = "float32") -> gx.Session:
    b = gx.GraphBuilder("add", opset=17)
    x = b.input("x", dtype, [3])
    b.output(b.Add(x, x))
    return gx.Session(b.build())


def _feed(value: Any, dtype: str = "float32") -> Callable[[], Any]:
    return lambda: _add(dtype).run({"x": value})


def _acl(fn: Callable[[Any], Any], profile: Any = None) -> Callable[[], Any]:
    """``fn(stream)`` on a fresh ACL device (finalized after, whatever happens)."""
    def call() -> Any:
        from acl_helpers import clean_acl

        clean_acl()
        try:
            acl.init(profile=profile or "ascend910")
            acl.set_device(0)
            return fn(acl.create_stream())
        finally:
            clean_acl()
    return call


def _launch(**cost: Any) -> Callable[[], Any]:
    return _acl(lambda s: acl.launch_kernel(lambda: None, 1, s, **cost))


def _after_fault(fault: type) -> Callable[[], Any]:
    """A kernel raises ``fault``; then a launch and a synchronize must work, and a view of
    what the second kernel wrote reads back (raised as the case's error to prove it)."""
    def body(s: Any) -> Any:
        def bad() -> None:
            raise fault()
        acl.launch_kernel(bad, 1, s)
        try:
            acl.synchronize_stream(s)
        except (fault, AclError):
            pass
        p = acl.malloc(16)
        acl.launch_kernel(lambda q: acl.view(q, np.float32, (4,)).__setitem__(..., 3.0), 1, s, p)
        acl.synchronize_stream(s)
        raise RuntimeError(f"recovered: {acl.view(p, np.float32, (4,)).tolist()}")
    return _acl(body)


def _cost_rule(name: str, flops: Any) -> Callable[[], Any]:
    def call() -> Any:
        gx.kernel(name, shape="same", cost=lambda c: {"flops": flops})(lambda x: x)
        b = gx.GraphBuilder("costs", opset=17)
        b.output(getattr(b, name)(b.input("x", "float32", [2])))
        return gx.Session(b.build()).compile({"x": np.ones(2, np.float32)})
    return call


def _loop(trips: int, grow: bool = False) -> gx.Graph:
    return gx.load(runaway_loop(trips, grow))


def _run_loop(trips: int, grow: bool = False, limit: str | None = "100", device: Any = None) -> Callable[[], Any]:
    def call() -> Any:
        import os

        old = os.environ.get("GRAPHEXEC_MAX_LOOP_ITERATIONS")
        if limit is not None:
            os.environ["GRAPHEXEC_MAX_LOOP_ITERATIONS"] = limit
        try:
            return gx.Session(_loop(trips, grow), device=device).run({"v0": np.zeros(1, np.float32)})
        finally:
            if old is None:
                os.environ.pop("GRAPHEXEC_MAX_LOOP_ITERATIONS", None)
            else:
                os.environ["GRAPHEXEC_MAX_LOOP_ITERATIONS"] = old
    return call


SMALL_HBM = load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": 1 << 20})
HUGE_HBM = load_profile("ascend910").model_copy(update={"hbm_capacity_bytes": 1 << 60})
LIMIT = "(set GRAPHEXEC_MAX_LOOP_ITERATIONS to allow more)"
FINITE = "ACL_ERROR_INVALID_PARAM (100000): {} must be finite and >= 0, got {}"

API: list[ApiCase] = [
    ApiCase("wrong answers", "feed_none", _feed(None), FeedError, "input 'x' is None; it takes a float32[3] tensor"),
    ApiCase("wrong answers", "feed_float_list_into_int", _feed([0.5, 1, 2], "int64"), FeedError,
            "input 'x': the list's float64 values do not convert to int64 unchanged"),
    ApiCase("wrong answers", "feed_int_past_uint8", _feed([1, 2, 300], "uint8"), FeedError,
            "input 'x': the list's int64 values do not convert to uint8 unchanged"),
    ApiCase("wrong answers", "feed_negative_into_unsigned", _feed([-1, 2, 3], "uint16"), FeedError,
            "input 'x': the list's int64 values do not convert to uint16 unchanged"),
    ApiCase("wrong answers", "feed_strings", _feed(["a", "b", "c"]), FeedError,
            "input 'x': a list of <U1 values is not a float32[3] tensor"),
    ApiCase("wrong answers", "feed_ragged", _feed([[1, 2], [3]]), FeedError,
            "input 'x': this list does not make an array (ragged?)"),
    ApiCase("wrong answers", "feed_dict_for_tensor", _feed({"a": 1}), FeedError,
            "input 'x': a dict of object values is not a float32[3] tensor"),
    ApiCase("wrong answers", "feed_complex_into_float", _feed([1j, 2, 3]), FeedError,
            "input 'x': the list's complex128 values do not convert to float32 unchanged"),
    ApiCase("wrong answers", "feeds_not_a_mapping", lambda: _add().run([np.ones(3, np.float32)]), FeedError,
            "feeds must be a mapping of input name to array, not list"),
    ApiCase("hangs", "launch_flops_nan", _launch(flops=float("nan")), AclError, FINITE.format("flops", "nan")),
    ApiCase("hangs", "launch_flops_inf", _launch(flops=float("inf")), AclError, FINITE.format("flops", "inf")),
    ApiCase("hangs", "launch_flops_negative", _launch(flops=-1.0), AclError, FINITE.format("flops", "-1.0")),
    ApiCase("hangs", "launch_bytes_nan", _launch(bytes=float("nan")), AclError, FINITE.format("bytes", "nan")),
    ApiCase("hangs", "launch_bytes_word", _launch(bytes="lots"), AclError,
            "ACL_ERROR_INVALID_PARAM (100000): acl.launch_kernel: bytes must be a number or None, got 'lots'"),
    ApiCase("hangs", "cost_rule_nan", _cost_rule("CorpusNanFlops", float("nan")), GraphError,
            "cost rule of graphexec.custom::CorpusNanFlops returned flops must be finite and >= 0, got nan"),
    ApiCase("hangs", "cost_rule_inf", _cost_rule("CorpusInfFlops", float("inf")), GraphError,
            "cost rule of graphexec.custom::CorpusInfFlops returned flops must be finite and >= 0, got inf"),
    ApiCase("hangs", "cost_rule_negative", _cost_rule("CorpusNegativeFlops", -2.0), GraphError,
            "cost rule of graphexec.custom::CorpusNegativeFlops returned flops must be finite and >= 0, got -2.0"),
    ApiCase("hangs", "loop_trip_count_10e12", _run_loop(10**12), KernelError,
            f"node loop (Loop): its trip count {10**12} is past the limit of 100 iterations, and only the trip "
            f"count can end it {LIMIT}"),
    ApiCase("hangs", "loop_while_true", _run_loop(np.iinfo(np.int64).max), KernelError,
            f"node loop (Loop): still running after 100 iterations, the limit {LIMIT}"),
    ApiCase("runtime faults", "kernel_keyboard_interrupt_then_recover", _after_fault(KeyboardInterrupt), RuntimeError,
            "recovered: [3.0, 3.0, 3.0, 3.0]"),
    ApiCase("runtime faults", "kernel_zero_division_then_recover", _after_fault(ZeroDivisionError), RuntimeError,
            "recovered: [3.0, 3.0, 3.0, 3.0]"),
    ApiCase("runtime faults", "malloc_past_host", _acl(lambda s: acl.malloc(1 << 58), HUGE_HBM), OutOfMemoryError,
            "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): cannot allocate 288230376151711744 bytes for malloc: the host "
            "cannot back that much emulated device memory"),
    ApiCase("runtime faults", "view_of_objects", _acl(lambda s: acl.view(acl.malloc(64), object, (8,))), AclError,
            "ACL_ERROR_RT_PARAM_INVALID (107000): device memory holds bytes, not object values"),
    ApiCase("runtime faults", "view_of_void", _acl(lambda s: acl.view(acl.malloc(64), "V0", (8,))), AclError,
            "ACL_ERROR_RT_PARAM_INVALID (107000): device memory holds bytes, not |V0 values"),
    ApiCase("runtime faults", "loop_outgrows_hbm", _run_loop(40, grow=True, limit=None, device=SMALL_HBM),
            OutOfMemoryError, "ACL_ERROR_RT_MEMORY_ALLOCATION (207001): cannot allocate 787456 bytes for io: "
            "809984 of 1048576 bytes of device memory in use"),
]

