"""Regenerate the JSON Schemas in this folder from the pydantic models.

Usage: ``python schemas/generate.py`` (writes) or ``python schemas/generate.py --check``
(exit 1 if a file is stale). To add a schema, add its file name and a function that
returns the schema dict to ``SCHEMAS``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from graphexec.cli.schema import cli_json_schema  # noqa: E402
from graphexec.frontend.yaml_schema import graph_json_schema  # noqa: E402
from graphexec.runtime.profiles import profile_json_schema  # noqa: E402
from graphexec.runtime.systems import system_json_schema  # noqa: E402

SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "cli.schema.json": cli_json_schema,
    "device.schema.json": profile_json_schema,
    "graph.schema.json": graph_json_schema,
    "system.schema.json": system_json_schema,
}


def render(name: str) -> str:
    """The exact text of schema file ``name``, as it should be on disk."""
    return json.dumps(SCHEMAS[name](), indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name in SCHEMAS:
        path, text = HERE / name, render(name)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not check:
            path.write_text(text, encoding="utf-8")
    verb = "stale" if check else "written"
    for name in stale:
        print(f"{name}: {verb}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
