"""The report pages' shared pieces: the style, sortable tables and their few lines of script."""

from __future__ import annotations

from typing import Any, Sequence

from graphexec._render import html

STYLE = """body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{border:1px solid #ccc;border-radius:6px;padding:.5em .8em}
.card b{display:block;font-size:1.3em}table{border-collapse:collapse;font-size:.85em}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}th{background:#f3f3f3;cursor:pointer}
td.n{text-align:right}.first{background:#fff4d6}svg{max-width:100%;height:auto}"""
SORT_JS = """document.querySelectorAll('table.sortable th').forEach(function(th){
  var i = th.cellIndex;   // the column within its own table (a page has several sortable tables)
  th.addEventListener('click', function(){
    var body = th.closest('table').tBodies[0], rows = Array.from(body.rows);
    var asc = th.dataset.dir !== 'asc'; th.dataset.dir = asc ? 'asc' : 'desc';
    rows.sort(function(a, b){
      var x = a.cells[i].dataset.v || a.cells[i].textContent, y = b.cells[i].dataset.v || b.cells[i].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function(r){ body.appendChild(r); });
  });
});"""


def cell_text(v: Any) -> str:
    return html(v)   # the one HTML rendering of a name (graphexec/_render.py)


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "", first: bool = False) -> str:
    def cell(v: Any) -> str:
        num = isinstance(v, (int, float)) or numeric(v)
        return f'<td class="n" data-v="{cell_text(v)}">{cell_text(v)}</td>' if num else f"<td>{cell_text(v)}</td>"

    body = "".join(f'<tr{" class=first" if first and i == 0 else ""}>{"".join(cell(v) for v in r)}</tr>'
                   for i, r in enumerate(rows))
    ths = "".join(f"<th>{cell_text(h)}</th>" for h in head)
    return f'<table class="{cls}"><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>'


def numeric(v: Any) -> bool:
    try:
        float(str(v))
        return True
    except ValueError:
        return False


_e, _table = cell_text, table   # the names the report modules use
