"""A program run with ASCEND_PROFILING_ENABLED=1 for the exit-time profile cases (issue 39,
class 4): ``python exit_child.py MODE MARK``. It runs a small model, then at exit the PROF
folder is written; MODE says where it pauses (writing MARK first, so the test knows when
to send its signal) or what it does before exiting."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

import graphexec as gx
import graphexec.profiling.env as env
import graphexec.profiling.msprof as msprof

mode, mark = sys.argv[1], Path(sys.argv[2])


def pause(fn):
    def slow(*args, **kwargs):
        out = fn(*args, **kwargs)
        mark.write_text("now")
        time.sleep(60)
        return out
    return slow


if mode == "write":           # inside the write: the temporary folder is full, not yet renamed
    msprof._fill = pause(msprof._fill)
elif mode == "diagnose":      # before the write: the runs are being diagnosed
    env.Collector.extras = pause(env.Collector.extras)

b = gx.GraphBuilder("g", opset=17)
b.output(b.Relu(b.input("x", "float32", [2, 3])))
gx.Session(b.build()).run({"x": np.ones((2, 3), np.float32)})
if mode == "chdir":           # a relative ASCEND_PROFILING_OUTPUT_PATH is the launch folder's
    os.chdir(mark)
if mode == "block":           # npu.profiler.profile(dir) into a folder that cannot be made
    import graphexec.npu as npu

    with npu.profiler.profile(str(mark / "sub")):
        (npu.ones(4).npu() + 1).cpu()
print("done")
