"""Every ``--json`` output is one object in one vocabulary, published as a JSON Schema
(``schemas/cli.schema.json``, whose ``version`` is ``SCHEMA_VERSION``): it starts with
``schema_version`` and ``command``, and a key means the same thing in every command
(``makespan_us`` simulated device time in us, ``speedup`` over the named baseline,
``streams`` an int or "auto", ``peak_bytes`` an int, ``*_utilization`` a fraction)."""

from __future__ import annotations

from typing import Any

from graphexec._render import json_text

SCHEMA_VERSION = "1.0"   # minor: keys added; major: a key changed meaning or type


def document(command: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "command": command, **body}


def emit(command: str, body: dict[str, Any]) -> None:
    """Print ``body`` as ``command``'s JSON document (standard JSON: no NaN, ASCII)."""
    print(json_text(document(command, body), indent=2, default=float))


def count(text: Any) -> Any:
    """A stream count as the vocabulary has it: an int, or "auto" (a CSV keeps it as text)."""
    return int(text) if isinstance(text, str) and text.isdigit() else text
