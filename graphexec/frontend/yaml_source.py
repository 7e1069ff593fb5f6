"""YAML text to plain data plus the line and column of every field.

PyYAML's composer keeps a mark on every node; walking its node tree ourselves (instead
of ``yaml.safe_load``) lets each problem point at the field at fault, and lets a
duplicate key be reported instead of silently overwritten.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from graphexec._limits import ALIAS_EXTRA_MAX, MAX_NESTING, BoundedLoader

__all__ = ["ALIAS_EXTRA_MAX", "MAX_NESTING", "Problem", "Source", "parse", "render_path"]

Path = tuple[str | int, ...]


class _Loader(BoundedLoader):
    """The bounded SafeLoader that also reads ``1e-5`` as a float (YAML 1.2), as people write epsilons."""


_EXPONENT_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789"))


def reads_as(text: str) -> str:
    """The tag graphexec's loader gives ``text`` written as a plain (unquoted) scalar."""
    return str(_Loader.resolve(_Loader, yaml.ScalarNode, text, (True, False)))   # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem in a graph file, at a 1-based line and column."""

    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.message}"


@dataclass
class Source:
    """A parsed YAML document and where each of its fields starts."""

    file: str
    data: Any
    marks: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def problem(self, path: Path, message: str) -> Problem:
        """A Problem at ``path``, or at the nearest enclosing field that has a mark."""
        for n in range(len(path), -1, -1):
            mark = self.marks.get(tuple(path[:n]))
            if mark is not None:
                return Problem(self.file, mark[0], mark[1], message)
        return Problem(self.file, 1, 1, message)


def render_path(path: Path) -> str:
    """``("nodes", 2, "op")`` as ``nodes[2].op``."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def parse(text: str, file: str) -> tuple[Source, list[Problem]]:
    """Parse ``text``; a syntax error or duplicate key is returned as a Problem."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        return Source(file, None), [Problem(file, line, col, f"invalid YAML: {_problem(e)}")]
    except yaml.YAMLError as e:
        return Source(file, None), [Problem(file, 1, 1, f"invalid YAML: {e}")]
    src = Source(file, None)
    problems: list[Problem] = []
    if root is None:
        return src, [Problem(file, 1, 1, "the file is empty; a graph needs at least name, outputs and nodes")]
    src.marks[()] = _mark(root)
    src.data = _walk(root, (), src, problems, yaml.constructor.SafeConstructor())
    return src, problems


_KINDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "NoneType": "null", "date": "a date",
          "datetime": "a date", "bytes": "binary data"}


def _problem(e: yaml.MarkedYAMLError) -> str:
    """PyYAML's problem in words that stand alone (its duplicate anchor says only 'second occurrence')."""
    if e.context and "duplicate anchor" in e.context and e.context_mark is not None:
        return f"{e.context.split(';')[0]} (first at line {e.context_mark.line + 1})"
    return str(e.problem or e)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _walk(node: yaml.Node, path: Path, src: Source, problems: list[Problem],
          ctor: yaml.constructor.SafeConstructor) -> Any:
    if isinstance(node, yaml.SequenceNode):
        out = []
        for i, item in enumerate(node.value):
            src.marks[path + (i,)] = _mark(item)
            out.append(_walk(item, path + (i,), src, problems, ctor))
        return out
    if isinstance(node, yaml.MappingNode):
        return _walk_mapping(node, path, src, problems, ctor)
    try:
        return ctor.construct_object(node, deep=True)
    except yaml.constructor.ConstructorError as e:
        line, col = _mark(node)
        problems.append(Problem(src.file, line, col, f"invalid YAML value: {e.problem}"))
        return None


def _walk_mapping(node: yaml.MappingNode, path: Path, src: Source, problems: list[Problem],
                  ctor: yaml.constructor.SafeConstructor) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    first: dict[Any, tuple[int, int]] = {}
    for key_node, value_node in node.value:
        key = _walk(key_node, path, src, problems, ctor)
        if isinstance(key, (list, dict)):
            line, col = _mark(key_node)
            problems.append(Problem(src.file, line, col, "a mapping key must be a scalar"))
            continue
        if not isinstance(key, str):  # every key of a graph file is a name: `5:` or `true:` is a typo for text
            line, col = _mark(key_node)
            kind = _KINDS.get(type(key).__name__, type(key).__name__)
            problems.append(Problem(src.file, line, col, f"mapping key {key_node.value!r} is read as {kind}, "
                                                         "not text; quote it"))
            continue
        if key in first:
            line, col = _mark(key_node)
            problems.append(Problem(src.file, line, col, f"duplicate key {key!r} (first at line {first[key][0]})"))
            continue
        first[key] = src.marks[path + (key,)] = _mark(key_node)
        out[key] = _walk(value_node, path + (key,), src, problems, ctor)
    return out
