"""YAML execution graphs: load, validate (every problem at once), and the format's entry points.

A graph file names its tensors (inputs, constants, optionally typed intermediates),
its nodes (any ONNX op or registered custom kernel, with optional ``stream_label`` and
``priority``), optionally a hand-written ``schedule`` of streams and events, and
device and session ``options``. See ``models/*.yaml`` and ``schemas/graph.schema.json``.

Example:
    >>> problems = validate_yaml("models/article_streams.yaml")   # [] when the file is fine
    >>> graph = load_yaml("models/article_streams.yaml")          # or GraphValidationError
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from graphexec._limits import check_file_size
from graphexec.errors import GraphValidationError, ModelLoadError
from graphexec.frontend import yaml_schema as S
from graphexec.frontend.yaml_build import Collector, build
from graphexec.frontend.yaml_checks import check_graph
from graphexec.frontend.yaml_source import Problem, Source, parse, render_path
from graphexec.ir import Graph


def load_yaml(path: str | os.PathLike[str]) -> Graph:
    """Load a YAML graph file.

    Raises:
        GraphValidationError: the file has problems; the message is the first one, and
            ``.problems`` holds them all.
    """
    graph, problems = check_yaml(path)
    return _or_raise(graph, problems)


def loads_yaml(text: str, file: str = "<string>", base: str | os.PathLike[str] = ".") -> Graph:
    """Load a YAML graph from text; ``base`` is where relative tensor files are found."""
    graph, problems = check_text(text, file, Path(base))
    return _or_raise(graph, problems)


def validate_yaml(path: str | os.PathLike[str]) -> list[Problem]:
    """Every problem of a YAML graph file, in file order ([] when it is fine)."""
    return check_yaml(path)[1]


def check_yaml(path: str | os.PathLike[str]) -> tuple[Graph | None, list[Problem]]:
    """The graph of a file (None if it cannot be built) and its problems."""
    p = Path(path)
    if not p.exists():
        raise ModelLoadError(f"{p}: no such file")
    if p.is_dir():
        raise ModelLoadError(f"{p}: is a directory, not a YAML graph")
    if not p.is_file():  # a device or a pipe would be read forever
        raise ModelLoadError(f"{p}: not a regular file")
    check_file_size(p, "YAML")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ModelLoadError(f"{p}: not a UTF-8 text file") from None
    except OSError as e:
        raise ModelLoadError(f"{p}: cannot read: {e.strerror or e}") from None
    return check_text(text, str(path), p.parent)


def check_text(text: str, file: str, base: Path) -> tuple[Graph | None, list[Problem]]:
    """Parse, validate against the schema, build and check; stops early only where it must."""
    src, problems = parse(text, file)
    if src.data is None:
        return None, problems
    if not isinstance(src.data, dict):
        return None, problems + [src.problem((), "a graph file is a mapping with name, inputs, outputs, "
                                                  "tensors and nodes")]
    try:
        spec = S.GraphSpec.model_validate(src.data)
    except ValidationError as e:
        return None, _sorted(problems + _schema_problems(e, src))
    out = Collector(src)
    out.problems = problems
    graph, index = build(spec, out, base)
    check_graph(graph, index, set(spec.tensors), out, types=not out.problems)
    return graph, _sorted(out.problems)


def _or_raise(graph: Graph | None, problems: list[Problem]) -> Graph:
    if problems or graph is None:
        more = f" (and {len(problems) - 1} more; `graphexec validate` lists them all)" if len(problems) > 1 else ""
        raise GraphValidationError(f"{problems[0]}{more}", problems)
    return graph


def _sorted(problems: list[Problem]) -> list[Problem]:
    return sorted(dict.fromkeys(problems), key=lambda p: (p.line, p.column))


def _schema_problems(err: ValidationError, src: Source) -> list[Problem]:
    """pydantic's errors, each at the field it is about, in the format's own words."""
    problems = []
    for e in err.errors():
        path = _data_path(src.data, e["loc"])
        where = render_path(path)
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = f"unknown field{_suggest(path)}"
        problems.append(src.problem(path, f"{where}: {msg}" if where else msg))
    return problems


def _data_path(data: Any, loc: tuple) -> tuple:
    """pydantic's ``loc`` as a path into the data, without union and validator labels."""
    path: list = []
    cur = data
    for k, key in enumerate(loc):
        if isinstance(cur, dict) and key in cur:
            cur = cur[key]
        elif isinstance(cur, list) and isinstance(key, int) and 0 <= key < len(cur):
            cur = cur[key]
        elif k != len(loc) - 1 or not isinstance(cur, dict):
            continue  # a label such as 'str', 'RecordItem' or '[key]'
        path.append(key)
    return tuple(path)


_MODELS: dict[tuple, type[BaseModel]] = {
    (): S.GraphSpec, ("nodes", "#"): S.NodeSpec, ("tensors", "*"): S.TensorSpec,
    ("tensors", "*", "random"): S.RandomInit, ("schedule",): S.ScheduleSpec,
    ("schedule", "streams", "#"): S.StreamSpec, ("options",): S.OptionsSpec,
}


def _suggest(path: tuple) -> str:
    """'; did you mean X?' for a misspelt field name, from the model the field sits in."""
    parent = tuple("#" if isinstance(p, int) else ("*" if i == 1 and path[0] == "tensors" else p)
                   for i, p in enumerate(path[:-1]))
    model = _MODELS.get(parent)
    if model is None or not path:
        return ""
    close = difflib.get_close_matches(str(path[-1]), list(model.model_fields), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; known fields: {', '.join(model.model_fields)}"
