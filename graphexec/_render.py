"""The one place an untrusted name (node, tensor, graph, file, profile) is rendered for each
medium it goes out on: a terminal, a CSV cell, HTML, JSON.

A model's names are the user's input, and a hostile one carries what each medium obeys:
ESC, BEL, CR or a bidi override repaints a terminal or fakes a line (``term``); a cell that
begins with ``= + - @`` (or TAB/CR) runs as a formula in a spreadsheet (``csv_cell``, as
OWASP's CSV-injection sheet says: a leading quote, the csv module quoting the rest);
markup needs escaping in HTML (``html``), ``$`` in a plot (``plot_text``); JSON must stay
standard JSON, with no ``Infinity`` or ``NaN`` (``json_text``).
"""

from __future__ import annotations

import html as _html
import json
import math
import re
from typing import Any

# C0 controls (TAB and LF too: a name is one line), DEL, C1 controls, and the characters
# that reorder or hide text: the bidi marks, embeddings, overrides and isolates (U+061C,
# U+200E/F, U+202A-E, U+2066-9), zero-width ones and the line/paragraph separators.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
FORMULA = tuple("=+-@\t\r")   # what a spreadsheet starts a formula with (OWASP)
QUOTE = "'"


def _escape(match: re.Match[str]) -> str:
    c = ord(match.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def term(text: object) -> str:
    """``text`` for a terminal: every control, bidi or invisible character shown as ``\\xNN``
    or ``\\uNNNN``, so the line reads as what it is and nothing is obeyed."""
    return UNSAFE.sub(_escape, str(text))


def term_lines(text: str) -> str:
    """A block the program laid out in lines: ``term`` on each line, the newlines kept."""
    return "\n".join(term(line) for line in str(text).split("\n"))


def csv_cell(value: Any) -> Any:
    """A cell for a CSV a spreadsheet may open: a string that would start a formula (or that
    starts with the quote this adds) gets a leading ``'``; numbers go as they are."""
    if isinstance(value, str) and value.startswith((*FORMULA, QUOTE)) and not _number(value):
        return QUOTE + value
    return value


def csv_value(cell: str) -> str:
    """The text ``csv_cell`` wrote, read back: the quote it added taken off (a cell from
    elsewhere that starts with a quote and no formula character stays as it is)."""
    if cell.startswith(QUOTE) and cell[1:].startswith((*FORMULA, QUOTE)) and not _number(cell[1:]):
        return cell[1:]
    return cell


NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _number(text: str) -> bool:
    return NUMBER.fullmatch(text) is not None


def html(text: object) -> str:
    """``text`` for HTML, quotes included (attributes too)."""
    return _html.escape(str(text), quote=True)


def plot_text(text: object) -> str:
    """``text`` for matplotlib: a ``$`` escaped, so that no name is parsed as mathtext (a
    ``$...$`` stream id or file name made the math parser raise)."""
    return str(text).replace("$", "\\$")


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (inf, -inf, nan) replaced by None, recursively:
    JSON has no token for them, and ``null`` is what a reader takes for "no number"."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def json_text(value: Any, **dumps: Any) -> str:
    """Standard JSON always: non-finite numbers as null, every non-ASCII character escaped
    (a name's controls and bidi marks arrive as ``\\u`` escapes, never raw)."""
    fallback = dumps.pop("default", None)
    if fallback is not None:   # what it makes of a numpy scalar is made finite too
        dumps["default"] = lambda o: finite(fallback(o))
    return json.dumps(finite(value), ensure_ascii=True, allow_nan=False, **dumps)
