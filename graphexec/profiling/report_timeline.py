"""The report's interactive timeline: every device slice drawn on a canvas by a few lines of
inline script, with zoom (wheel, buttons), pan (drag) and a hover box (op name, type,
shapes, start, duration, FLOPs, bytes). Nothing is fetched: the slices are JSON in the page.

A lane per (process, thread) that has kernels, copies, collectives or events, named as the
trace names them. A slice's shapes, FLOPs and bytes come from its op-table row (matched by
name and start time, else by name). At most ``LIMIT`` slices are drawn, the longest first
(the page says so when it cuts).
"""

from __future__ import annotations

import json
from typing import Any

from graphexec.profiling.view_data import View

LIMIT = 50_000
CATS = ("kernel", "memcpy", "hccl", "event")
COLORS = {"cube": "#1f77b4", "vector": "#2ca02c", "aicpu": "#9467bd", "memcpy": "#ff7f0e", "hccl": "#d62728",
          "event": "#bbbbbb", "kernel": "#17becf"}
JS = """(function(){var D=JSON.parse(document.getElementById('tl-data').textContent);
var c=document.getElementById('tl-canvas'),tip=document.getElementById('tl-tip'),
 win=document.getElementById('tl-window');
var S=D.strings,LH=16,LW=170,t0=D.lo,t1=D.hi,g=c.getContext('2d'),drag=null;
c.width=Math.max(600,(c.parentNode.clientWidth||1000)-4);c.height=D.lanes.length*LH+4;
function X(t){return LW+(t-t0)/(t1-t0)*(c.width-LW);}
function T(px){return t0+(px-LW)/(c.width-LW)*(t1-t0);}
function draw(){g.clearRect(0,0,c.width,c.height);g.font='10px sans-serif';
 D.lanes.forEach(function(l,i){g.fillStyle=i%2?'#fafafa':'#f0f0f0';g.fillRect(0,i*LH,c.width,LH);
  g.fillStyle='#333';g.fillText(l.slice(0,28),2,i*LH+12);});
 D.s.forEach(function(s){var a=X(s[1]),b=X(s[1]+s[2]);if(b<LW||a>c.width)return;a=Math.max(a,LW);
  g.fillStyle=D.colors[s[5]];g.fillRect(a,s[0]*LH+2,Math.max(1,b-a),LH-4);});
 win.textContent=t0.toFixed(3)+' .. '+t1.toFixed(3)+' us';}
function zoom(f,at){var m=(at===undefined)?(t0+t1)/2:at,a=m-(m-t0)*f,b=m+(t1-m)*f;
 if(b-a<1e-4)return;t0=a;t1=b;draw();}
function pan(dt){t0+=dt;t1+=dt;draw();}
function hit(px,py){var lane=Math.floor(py/LH),best=null;D.s.forEach(function(s){if(s[0]!==lane)return;
 var a=X(s[1]),b=Math.max(X(s[1]+s[2]),a+1);if(px>=a-1&&px<=b+1)best=s;});return best;}
function hover(px,py){var s=hit(px,py);if(!s){tip.style.display='none';return null;}
 var r=D.rows[s[6]]||[];tip.textContent=S[s[3]]+'\\n'+S[s[4]]+'\\nstart '+s[1].toFixed(3)+' us, '+s[2].toFixed(3)+
 ' us'+(r.length?'\\ninputs '+r[0]+'\\noutputs '+r[1]+'\\nFLOPs '+r[2]+', bytes '+r[3]:'');
 tip.style.display='block';tip.style.left=(px+12)+'px';tip.style.top=(py+12)+'px';return tip.textContent;}
c.addEventListener('wheel',function(e){e.preventDefault();zoom(e.deltaY<0?0.8:1.25,T(e.offsetX));});
c.addEventListener('mousedown',function(e){drag=e.offsetX;});
window.addEventListener('mouseup',function(){drag=null;});
c.addEventListener('mouseleave',function(){tip.style.display='none';});
c.addEventListener('mousemove',function(e){if(drag!==null){pan((drag-e.offsetX)/(c.width-LW)*(t1-t0));
 drag=e.offsetX;return;}hover(e.offsetX,e.offsetY);});
document.getElementById('tl-in').onclick=function(){zoom(0.5);};
document.getElementById('tl-out').onclick=function(){zoom(2);};
document.getElementById('tl-reset').onclick=function(){t0=D.lo;t1=D.hi;draw();};
window.graphexecTimeline={zoom:zoom,pan:pan,hover:hover,x:X,lane:LH,range:function(){return [t0,t1];}};
draw();})();"""


def _lanes(view: View, events: list[dict[str, Any]]) -> tuple[dict[tuple[Any, Any], int], list[str]]:
    procs = {e["pid"]: str(e["args"].get("name", e["pid"])) for e in view.events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e.get("tid")): str(e["args"].get("name", e.get("tid"))) for e in view.events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    keys = sorted({(e["pid"], e["tid"]) for e in events}, key=lambda k: (str(k[0]).zfill(8), str(k[1]).zfill(8)))
    names = [f"{procs.get(p, p)}: {threads.get((p, t), t)}" for p, t in keys]
    return {k: i for i, k in enumerate(keys)}, names


def data(view: View) -> dict[str, Any]:
    """The slices as the script reads them (strings interned, rows by index)."""
    events = [e for e in view.events if e.get("ph") == "X" and e.get("cat") in CATS]
    cut = len(events) > LIMIT
    if cut:
        events = sorted(events, key=lambda e: -float(e["dur"]))[:LIMIT]
    lane, names = _lanes(view, events)
    strings: dict[str, int] = {}
    colors = list(COLORS)

    def sid(v: Any) -> int:
        return strings.setdefault(str(v), len(strings))

    by_start = {(str(r.get("Op Name")), str(r.get("Task Start Time(us)"))): i for i, r in enumerate(view.rows)}
    by_name = {str(r.get("Op Name")): i for i, r in enumerate(view.rows)}
    rows = [[str(r.get("Input Shapes", "")), str(r.get("Output Shapes", "")), str(r.get("FLOPs", "")),
             str(r.get("Bytes", ""))] for r in view.rows]
    slices = []
    for e in events:
        a = e.get("args", {})
        kind = a.get("unit") if e["cat"] == "kernel" and a.get("unit") in COLORS else e["cat"]
        row = by_start.get((str(e["name"]), f"{float(e['ts']):.3f}"), by_name.get(str(e["name"]), -1))
        slices.append([lane[(e["pid"], e["tid"])], float(e["ts"]), float(e["dur"]), sid(e["name"]),
                       sid(a.get("op", e["cat"])), colors.index(kind), row])
    lo = min((s[1] for s in slices), default=0.0)
    hi = max((s[1] + s[2] for s in slices), default=1.0)
    return {"lanes": names, "s": slices, "strings": list(strings), "rows": rows, "lo": lo, "hi": max(hi, lo + 1e-3),
            "colors": [COLORS[k] for k in colors], "cut": cut, "n": len(slices)}


def section(view: View) -> str:
    """The timeline's HTML: controls, canvas, hover box and its data and script."""
    d = data(view)
    if not d["s"]:
        return "<p>no device slices in this profile</p>"
    blob = json.dumps(d, separators=(",", ":")).replace("<", "\\u003c")   # no tag can end the data block
    note = f" (the {LIMIT:,} longest of more)" if d["cut"] else ""
    return ('<p><button id="tl-in">zoom in</button> <button id="tl-out">zoom out</button> '
            '<button id="tl-reset">reset</button> <span id="tl-window"></span> '
            f'<span>{d["n"]} slices{note}; wheel to zoom, drag to pan, hover for details</span></p>'
            '<div id="tl-box" style="position:relative;overflow-x:hidden">'
            '<canvas id="tl-canvas" style="cursor:grab"></canvas>'
            '<pre id="tl-tip" style="display:none;position:absolute;background:#fff;border:1px solid #888;'
            'padding:4px;margin:0;font-size:11px;pointer-events:none"></pre></div>'
            f'<script type="application/json" id="tl-data">{blob}</script><script>{JS}</script>')
