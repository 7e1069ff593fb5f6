"""Issue 39, class 4: the exit-time profile (ASCEND_PROFILING_ENABLED=1) under SIGTERM and
SIGINT, its relative path, and whose setting a warning names. Each case runs
exit_child.py as a process; the folder must be whole or absent, and the line and exit
status exact (128 + the signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hardening.round_three import EXIT_PROFILE

ROOT = Path(__file__).resolve().parents[2]
QUICK = {"sigterm_during_the_write", "relative_path_after_chdir"}


def _run(case, d: Path) -> tuple[int, str]:
    environ, argv, signum = case.make(d)
    (d / "afile").write_text("a file where a folder should be")
    (d / "elsewhere").mkdir()
    env = {**os.environ, **environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"}
    p = subprocess.Popen([sys.executable, *argv], cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    if signum is not None:
        mark = Path(argv[-1])
        deadline = time.monotonic() + 120
        while not mark.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        p.send_signal(signum)
    _, err = p.communicate(timeout=120)
    return p.returncode, err


def _whole_or_absent(folder: Path) -> None:
    if not folder.exists():
        return
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")], "a temporary folder was left"
    for prof in folder.glob("PROF_*"):
        assert any(prof.rglob("README.txt")) and any(prof.rglob("op_summary_*.csv"))


@pytest.mark.parametrize("case", [pytest.param(c, marks=[] if c.name in QUICK else [pytest.mark.slow])
                                  for c in EXIT_PROFILE], ids=[c.name for c in EXIT_PROFILE])
def test_issue_39_case_exit_profile(case, tmp_path):
    rc, err = _run(case, tmp_path)
    assert (rc, err) == (case.rc, case.message.format(d=tmp_path) + "\n" if case.message else "")
    _whole_or_absent(tmp_path / "prof")
    if case.name.startswith("sig"):
        assert not list((tmp_path / "prof").glob("PROF_*"))   # paused before the rename: absent
    if case.name == "relative_path_after_chdir":
        assert len(list((tmp_path / "prof").glob("PROF_*"))) == 1 and not (tmp_path / "elsewhere" / "prof").exists()
