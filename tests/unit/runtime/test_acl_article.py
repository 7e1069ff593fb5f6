"""The runtime article's examples (shared/seed, the CANN runtime primer) and the README's, as tests."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from graphexec import acl
from graphexec.acl.state import STATE

from acl_helpers import MB, download as _download, kernels as _kernels, scale as _scale, upload as _upload
ROOT = Path(__file__).resolve().parents[3]


def test_article_context_on_device_0(fresh):
    acl.init()
    acl.set_device(0)
    ctx = acl.create_context(0)
    assert acl.get_current_context() is ctx and acl.get_device() == 0
    acl.destroy_context(ctx)
    acl.reset_device(0)
    acl.finalize()


def test_article_two_streams_event_and_cleanup(rt):
    n = 1 << 16
    d_a, d_b = _upload(np.arange(n, dtype=np.float32)), acl.malloc(4 * n)
    d_c, d_d = _upload(np.ones(n, np.float32)), acl.malloc(4 * n)
    stream1, stream2 = acl.create_stream(), acl.create_stream()
    acl.launch_kernel(_scale, 8, stream1, d_a, d_b, n, 2.0, flops=1e8, bytes=8 * n)   # preprocess
    acl.launch_kernel(_scale, 8, stream2, d_c, d_d, n, 3.0, flops=1e8, bytes=8 * n)   # main kernel
    event1 = acl.create_event()
    acl.record_event(event1, stream1)
    acl.stream_wait_event(stream2, event1)
    acl.launch_kernel(lambda: _scale(d_b, d_d, n, 1.0) or None, 16, stream2, reads=[d_b], writes=[d_d],
                      flops=n, bytes=8 * n, name="postprocess")
    acl.synchronize_stream(stream1)
    acl.synchronize_stream(stream2)
    pre, (main, post) = _kernels(stream1.id)[0], _kernels(stream2.id)
    assert main.start_t < pre.end_t and pre.start_t < main.end_t      # the two streams overlap
    assert post.start_t >= pre.end_t                                  # postprocess waited for stream 1
    np.testing.assert_array_equal(_download(d_d, n), 2 * np.arange(n, dtype=np.float32))
    assert acl.hazards() == []
    acl.destroy_stream(stream1)
    acl.destroy_stream(stream2)
    acl.destroy_event(event1)
    for p in (d_a, d_b, d_c, d_d):
        acl.free(p)


def test_article_device_malloc_copies_and_free(rt):
    size = MB
    free_before, _ = acl.get_mem_info(acl.HBM_MEM)
    d_ptr = acl.malloc(size, acl.MEM_MALLOC_HUGE_FIRST)
    h_ptr = np.frombuffer(np.random.default_rng(0).bytes(size), np.uint8).copy()
    acl.memcpy(d_ptr, size, h_ptr, size, acl.MEMCPY_HOST_TO_DEVICE)
    back = np.zeros(size, np.uint8)
    acl.memcpy(back, size, d_ptr, size, acl.MEMCPY_DEVICE_TO_HOST)
    np.testing.assert_array_equal(back, h_ptr)
    acl.free(d_ptr)
    assert acl.get_mem_info(acl.HBM_MEM)[0] == free_before


def test_readme_acl_example_runs(fresh):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## The runtime, ACL style", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {})
    assert not STATE.initialized          # the example cleans up after itself
