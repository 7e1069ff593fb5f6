"""Every kind of report in headless Chromium with the network off: one card, several cards
(a whole-run view and each card's), eager steps from the torch-style profiler, collectives.
The page's own numbers are in the DOM, its timeline zooms, pans and shows an op on hover,
the op table filters, and no console error is logged (harness: test_view_browser)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_view_browser import CHROMIUM, INSTALL, MODEL, ROOT, chromium, cli, console

NO_BROWSER = f"headless Chromium is not installed; to run these: {INSTALL}"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason=NO_BROWSER)]

EXERCISE = """<script>
var T=window.graphexecTimeline,c=document.getElementById('tl-canvas'),r=c.getBoundingClientRect();
var D=JSON.parse(document.getElementById('tl-data').textContent),b=document.body;
b.setAttribute('data-full',T.range().join(','));
c.dispatchEvent(new WheelEvent('wheel',{deltaY:-100,clientX:r.left+c.width/2,clientY:r.top+4,bubbles:true,
 cancelable:true}));
b.setAttribute('data-zoomed',T.range().join(','));
c.dispatchEvent(new MouseEvent('mousedown',{clientX:r.left+300,clientY:r.top+4,bubbles:true}));
c.dispatchEvent(new MouseEvent('mousemove',{clientX:r.left+200,clientY:r.top+4,bubbles:true}));
window.dispatchEvent(new MouseEvent('mouseup',{bubbles:true}));
b.setAttribute('data-panned',T.range().join(','));
document.getElementById('tl-reset').click();
var s=D.s.slice().sort(function(x,y){return y[2]-x[2];})[0];
c.dispatchEvent(new MouseEvent('mousemove',{clientX:r.left+T.x(s[1]+s[2]/2),clientY:r.top+s[0]*T.lane+8,bubbles:true}));
b.setAttribute('data-hovered',D.strings[s[3]]);
var f=document.getElementById('op-filter');f.value=FILTER;f.dispatchEvent(new Event('input'));
</script></body>"""


def _env(**extra: str) -> dict[str, str]:
    """The checkout's graphexec for a script run apart, whether or not a copy is installed."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **extra}


CARD = """<script>
var sel=document.getElementById('card-select');sel.value='CARD';sel.dispatchEvent(new Event('change'));
document.body.setAttribute('data-card-ops',document.getElementById('op-count').textContent);
document.body.setAttribute('data-card-shown',Array.from(document.querySelectorAll('.per-card')).filter(function(d){
 return d.style.display!=='none';}).map(function(d){return d.getAttribute('data-card');}).join(','));
</script></body>"""


def _dom(page: Path, tmp: Path, text: str, card: int | None = None) -> str:
    copy = tmp / f"x-{page.stem}.html"
    script = EXERCISE.replace("FILTER", json.dumps(text))
    if card is not None:   # then pick one card in the selector
        script = script.replace("</body>", CARD.replace("CARD", str(card)))
    copy.write_text(page.read_text().replace("</body>", script))
    p = chromium(copy, "--dump-dom", "--window-size=1280,2000")
    assert p.returncode == 0, p.stderr[-2000:]
    assert console(p.stderr) == [], console(p.stderr)
    return p.stdout


def _attr(dom: str, name: str) -> str:
    return re.search(rf'data-{name}="([^"]*)"', dom).group(1)


def _interactive(dom: str) -> str:
    """Zoom narrows the window, a drag moves it, hover shows the longest slice: its text."""
    full, zoomed, panned = ([float(x) for x in _attr(dom, k).split(",")] for k in ("full", "zoomed", "panned"))
    assert zoomed[1] - zoomed[0] == pytest.approx(0.8 * (full[1] - full[0]))
    assert panned[1] - panned[0] == pytest.approx(zoomed[1] - zoomed[0]) and panned[0] > zoomed[0]
    tip = dom.split('id="tl-tip"')[1].split("</pre>")[0]
    assert "display: block" in tip and _attr(dom, "hovered") in tip
    return tip


def _report(tmp: Path, src: Path, name: str) -> Path:
    out = tmp / f"{name}.html"
    v = cli("view", str(src), "-o", str(out))
    assert v.returncode == 0 and v.stderr == "", v.stderr
    text = out.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text) and "<script src" not in text
    return out


def test_one_card(tmp_path):
    assert cli("run", str(MODEL), "--streams", "2", "--profile", str(tmp_path / "p")).returncode == 0
    doc = json.loads((tmp_path / "p" / "timeline.json").read_text())
    dom = _dom(_report(tmp_path, tmp_path / "p", "one"), tmp_path, "Conv")
    tip = _interactive(dom)
    rows = list(__import__("csv").DictReader(open(tmp_path / "p" / "op_summary.csv")))
    longest = max(rows, key=lambda r: float(r["Task Duration(us)"]))
    assert f"FLOPs {longest['FLOPs']}, bytes {longest['Bytes']}" in tip and longest["Input Shapes"] in tip
    convs = sum("Conv" in "".join(r.values()) for r in rows)
    assert f'id="op-count">{convs} of {len(rows)} ops shown<' in dom
    assert dom.count('style="display: none;"') >= len(rows) - convs
    m = doc["otherData"]["memory"]
    assert f"peak in use {m['peak_bytes']:,} bytes at {m['peak_us']:,.3f} us with {m['live_count']} tensors" in dom
    assert f"<td>{m['live'][0][0]}</td>" in dom
    stat = dom.split('class="sortable op-statistic"')[1].split("</table>")[0]
    assert f'<td>Conv</td><td class="n" data-v="{sum(r["OP Type"] == "Conv" for r in rows)}">' in stat


def test_several_cards_whole_run_and_each_card(tmp_path):
    p = cli("run", str(MODEL), "--devices", "2", "--parallel", "pipeline", "--microbatches", "2", "--shape",
            "data=2,192,28,28", "--profile", str(tmp_path / "p"))
    assert p.returncode == 0, p.stderr
    other = json.loads((tmp_path / "p" / "timeline.json").read_text())["otherData"]
    stats = other["stats"]
    dom = _dom(_report(tmp_path, tmp_path / "p", "cards"), tmp_path, "", card=1)
    _interactive(dom)
    rows = list(__import__("csv").DictReader(open(tmp_path / "p" / "op_summary.csv")))
    mine = [r for r in rows if r["Device_id"] == "1"]
    assert _attr(dom, "card-ops") == f"{len(mine)} of {len(rows)} ops shown"   # the selector picks card 1's ops
    assert _attr(dom, "card-shown") == "1,1"   # its memory and op types, not the whole run's
    (mem,) = [m for m in other["card_memory"] if m["device"] == 1]
    assert f'id="memory-peak-card-1">activation pool: {mem["reserved_bytes"]:,} bytes reserved' in dom
    stat = dom.split('class="sortable op-statistic-card"')[2].split("</table>")[0]
    conv = sum(r["OP Type"] == "Conv" for r in mine)
    assert f'<td>Conv</td><td class="n" data-v="{conv}">' in stat
    assert "graphexec profile: inception_block on 2 x ascend910 (pipeline parallel)</h1>" in dom
    assert f'id="metric-makespan_us">{stats["makespan_us"]:,.1f} us<' in dom   # the whole run's
    cards = dom.split('class="sortable cards"')[1].split("</table>")[0]
    for d in stats["per_device"]:
        assert f'data-v="{d["makespan_us"]:.3f}"' in cards
    assert 'id="card-0"' in dom and 'id="card-1"' in dom
    assert re.search(r"Diagnosis: what bounds the run \(card \d's: the card that bounds the makespan\)", dom)
    assert 'id="diagnosis-card-0"' in dom and 'id="diagnosis-card-1"' in dom   # and every card's own


def test_eager_steps_with_memory(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent(f"""
        import graphexec.npu as npu
        P = npu.profiler
        x = npu.ones(64, 64)
        with P.profile(schedule=P.schedule(wait=1, warmup=0, active=3, repeat=1), profile_memory=True,
                       record_shapes=True, on_trace_ready=P.tensorboard_trace_handler({str(tmp_path / "e")!r})) as p:
            for _ in range(4):
                x = npu.ops.relu(x @ x) * 0.01 + 1
                x.numpy()
                p.step()
    """))
    assert subprocess.run([sys.executable, str(script)], env=_env(), timeout=300).returncode == 0
    (folder,) = (tmp_path / "e").iterdir()
    doc = json.loads((folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    dom = _dom(_report(tmp_path, folder, "eager"), tmp_path, "MatMul")
    _interactive(dom)
    steps = dom.split('class="sortable steps"')[1].split("</table>")[0]
    for r in doc["otherData"]["runs"]:
        assert f'data-v="{r["stats"]["makespan_us"]:.3f}"' in steps
    assert len(re.findall("<tr>", steps)) == 1 + 3 and "caching allocator: peak allocated" in dom
    assert 'id="op-count">3 of 15 ops shown<' in dom


def test_collectives(tmp_path):
    script = tmp_path / "h.py"
    script.write_text(textwrap.dedent("""
        from graphexec import acl, hccl
        acl.init(system="atlas800-910")
        comms = hccl.comm_init_all(4, [0, 1, 2, 3])
        for d in range(4):
            acl.set_device(d)
            s, p = acl.create_stream(), acl.malloc(4 << 20)
            hccl.all_reduce(p, p, 1 << 20, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comms[d], s)
        for d in range(4):
            acl.set_device(d)
            acl.synchronize_device()
    """))
    env = _env(ASCEND_PROFILING_ENABLED="1", ASCEND_PROFILING_OUTPUT_PATH=str(tmp_path / "h"))
    assert subprocess.run([sys.executable, str(script)], env=env, timeout=300).returncode == 0
    doc = json.loads(next((tmp_path / "h").rglob("msprof_*.json")).read_text())
    parts = [e for e in doc["traceEvents"] if e.get("cat") == "hccl"]
    dom = _dom(_report(tmp_path, tmp_path / "h", "hccl"), tmp_path, "x")
    coll = dom.split('class="collectives"')[1].split("</table>")[0]
    transit = parts[0]["dur"]   # launched together: no rank waits, every part lasts the transfer
    assert f'<td>HcclAllReduce</td><td class="n" data-v="4">4</td><td>{4 << 20:,}</td>' in coll
    assert f'data-v="{transit:.3f}"' in coll
    links = dom.split('class="links"')[1].split("</table>")[0]
    assert "<td>HCCS</td>" in links


def test_steps_of_sessions_and_eager_ops(tmp_path):
    script = tmp_path / "m.py"
    script.write_text(textwrap.dedent(f"""
        import numpy as np
        import graphexec as gx
        import graphexec.npu as npu
        P = npu.profiler
        g = gx.load({str(MODEL)!r})
        s = gx.Session(g, streams=2)
        x, y = np.zeros((1, 192, 28, 28), np.float32), npu.ones(32, 32)
        with P.profile(schedule=P.schedule(wait=0, warmup=0, active=2, repeat=1), profile_memory=True,
                       on_trace_ready=P.tensorboard_trace_handler({str(tmp_path / "m")!r})) as p:
            for _ in range(2):
                s.run({{g.inputs[0]: x}})
                y = (y @ y) * 0.5
                y.numpy()
                p.step()
    """))
    assert subprocess.run([sys.executable, str(script)], env=_env(), timeout=300).returncode == 0
    (folder,) = (tmp_path / "m").iterdir()
    doc = json.loads((folder / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    dom = _dom(_report(tmp_path, folder, "mixed"), tmp_path, "Conv")
    _interactive(dom)
    steps = dom.split('class="sortable steps"')[1].split("</table>")[0]
    for r in doc["otherData"]["runs"]:   # the Session runs and the eager card's windows, each a row
        assert f'data-v="{r["stats"]["makespan_us"]:.3f}"' in steps
    assert len(re.findall("<tr>", steps)) == 1 + len(doc["otherData"]["runs"]) == 1 + 4
