"""Issue 39's frontend classes (round_three_frontend.py: 6, 7, 10, 11): each case's exact line
and exit code, or a clean run and what it wrote; and a long inlining stops on SIGINT and
SIGTERM with 130 and 143."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from hardening.round_three_frontend import FRONTEND, _calling, _doubling
from hardening.test_corpus import ROOT, expected, run_cli


@pytest.mark.parametrize("case", FRONTEND, ids=[c.name for c in FRONTEND])
def test_issue_39_case_frontend(case, tmp_path, capsys):
    args = case.make(tmp_path)
    capsys.readouterr()   # what a maker's own steps printed
    rc, out, err = run_cli(args, capsys)
    if case.message:
        assert (rc, err) == (case.rc, expected(args, case.message, tmp_path))
        assert out == ""
    else:
        assert (rc, err) == (case.rc, "")
    if case.check is not None:
        case.check(tmp_path)


def test_every_frontend_class_has_its_cases():
    counts = {cls: sum(c.cls == cls for c in FRONTEND) for cls in dict.fromkeys(c.cls for c in FRONTEND)}
    assert set(counts) == {"functions", "attributes", "round_trips", "leftovers"} and min(counts.values()) >= 5, counts
    assert len({c.name for c in FRONTEND}) == len(FRONTEND)


@pytest.mark.slow
@pytest.mark.parametrize("sig,rc,line", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_long_inlining_stops_on_a_signal(sig, rc, line, tmp_path):
    """2^16 nodes (within the bound) take seconds to inline: the signal ends it at once."""
    model = _calling(_doubling(16))(tmp_path)[1]
    code = ("import sys; from graphexec import cli; print('ready', flush=True); "
            f"sys.exit(cli.main(['run', {str(model)!r}]))")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    time.sleep(1.5)
    p.send_signal(sig)
    t0 = time.monotonic()
    _, err = p.communicate(timeout=60)
    assert p.returncode == rc and err.strip() == f"graphexec: {line}", err
    assert time.monotonic() - t0 < 10
