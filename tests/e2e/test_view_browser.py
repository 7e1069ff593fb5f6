"""`graphexec view` writes a report that a real browser renders: headless Chromium (Debian's
`chromium`; .ci/run installs it) loads the file with no network, draws a page that is not
blank, shows the run's own numbers in the DOM, sorts the op table, and logs no console error.
Skipped only where no chromium binary exists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "inception_block.onnx"
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
INSTALL = "sudo apt-get update && sudo apt-get install -y chromium"   # Debian/Ubuntu; .ci/run does this
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason=f"headless Chromium is not installed; to run these: {INSTALL}")]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=2000"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def chromium(page: Path, *args: str) -> subprocess.CompletedProcess:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *FLAGS, *args, page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=120)


def console(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("view")
    p = cli("run", str(MODEL), "--streams", "2", "--profile", str(tmp / "prof"))
    assert p.returncode == 0, p.stderr
    out = tmp / "report.html"
    v = cli("view", str(tmp / "prof"), "-o", str(out))
    assert v.returncode == 0 and v.stderr == "", v.stderr
    other = json.loads((tmp / "prof" / "timeline.json").read_text())["otherData"]
    return out, other


def test_the_page_is_self_contained(report):
    page, _ = report
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text)
    assert "<link" not in text and "@import" not in text and "<script src" not in text


def test_the_dom_holds_the_runs_numbers(report):
    page, other = report
    p = chromium(page, "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    dom, stats, diagnosis = p.stdout, other["stats"], other["diagnosis"]
    for key in ("cube_utilization", "vector_utilization", "hbm_utilization"):
        assert f'id="metric-{key}">{stats[key]:.1%}<' in dom, key
    assert f'id="metric-makespan_us">{stats["makespan_us"]:,.1f} us<' in dom
    assert f'id="metric-mean_queue_depth">{stats["mean_queue_depth"]:.2f}<' in dom
    first = diagnosis["causes"][0]
    assert f"<b>{first['reason']}</b>" in dom and f"{first['gain']:.2f}x" in dom
    assert dom.count("<svg") >= 3                                             # utilization, queue, Gantt
    launch = diagnosis["analyses"]["launch"]
    assert f"{int(launch['kernels'])} kernels, {int(launch['short_kernels'])} shorter than their host launch" in dom
    kernels = int(launch["kernels"])   # one op-table row each (7 once the block's Conv+Relu pairs fuse)
    assert len(re.findall(r"<tr>", dom.split('class="sortable ops"')[1].split("</table>")[0])) == 1 + kernels
    assert console(p.stderr) == [], console(p.stderr)


def test_the_op_table_sorts_in_the_browser(report, tmp_path):
    """Click the duration header twice (descending) from a script added to a copy of the page."""
    page, other = report
    click = ("<script>var th=[...document.querySelectorAll('table.sortable th')].find(t=>t.textContent"
             "==='Task Duration(us)');th.click();th.click();</script></body>")
    copy = tmp_path / "clicked.html"
    copy.write_text(page.read_text().replace("</body>", click))
    p = chromium(copy, "--dump-dom")
    table = p.stdout.split('class="sortable ops"')[1].split("</table>")[0]
    col = [c for c in re.findall(r"<th[^>]*>([^<]*)</th>", table)].index("Task Duration(us)")
    rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
    durations = [float(re.findall(r"<td[^>]*>([^<]*)</td>", r)[col]) for r in rows]
    kernels = int(other["diagnosis"]["analyses"]["launch"]["kernels"])
    assert len(durations) == kernels > 1 and durations == sorted(durations, reverse=True)
    assert console(p.stderr) == []


def test_the_screenshot_is_not_blank(report, tmp_path):
    import numpy as np
    from PIL import Image

    page, _ = report
    shot = tmp_path / "shot.png"
    p = chromium(page, f"--screenshot={shot}", "--window-size=1280,1600")
    assert p.returncode == 0 and shot.is_file(), p.stderr[-2000:]
    px = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    assert (px != 255).any(axis=1).mean() > 0.03                                   # not a blank page
    assert (np.abs(px - [0x1F, 0x77, 0xB4]).max(axis=1) < 12).sum() > 500            # the cube's bars are drawn


def test_a_console_error_would_be_caught(tmp_path):
    """The check above can fail: a page that throws is seen."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>null.f();</script></body></html>")
    assert any("Uncaught" in line for line in console(chromium(bad, "--dump-dom").stderr))


def test_view_of_an_env_profile_and_bad_input(tmp_path):
    import os
    import textwrap

    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(f"""
        import graphexec as gx
        g = gx.load({str(MODEL)!r})
        gx.Session(g, streams=1).run(gx.default_feeds(g))
    """))
    env = {**os.environ, "ASCEND_PROFILING_ENABLED": "1", "ASCEND_PROFILING_OUTPUT_PATH": str(tmp_path / "out")}
    assert subprocess.run([sys.executable, str(script)], env=env, timeout=300).returncode == 0
    p = cli("view", str(tmp_path / "out"), "-o", str(tmp_path / "r.html"))
    assert p.returncode == 0, p.stderr
    dom = chromium(tmp_path / "r.html", "--dump-dom").stdout
    assert 'id="metric-cube_utilization"' in dom and "inception_block" in dom
    bad = cli("view", str(tmp_path / "nothing"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file or folder" in bad.stderr
    (tmp_path / "x.json").write_text("{")
    bad = cli("view", str(tmp_path / "x.json"), "-o", str(tmp_path / "x.html"))
    assert bad.returncode == 2 and "not JSON" in bad.stderr and not (tmp_path / "x.html").exists()
