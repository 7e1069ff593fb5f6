"""Hardware described as data: YAML files validated by a pydantic model, built-ins shipped
in a package folder, one-line errors naming the file and the field. Device profiles
(``profiles.py``) and system profiles (``systems.py``) are both read this way."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from graphexec._limits import BoundedLoader
from graphexec.errors import DeviceError

M = TypeVar("M", bound=BaseModel)


def describe(error: Any) -> str:
    """One pydantic error as "field 'x.y': what is wrong"."""
    loc = ".".join(str(part) for part in error["loc"])
    if error["type"] == "missing":
        return f"field '{loc}': required but missing"
    if error["type"] == "extra_forbidden":
        return f"field '{loc}': unknown field"
    if error["type"] == "value_error":  # only our validators raise these; they name the field
        return str(error["ctx"]["error"])
    return f"field '{loc}': {error['msg']} (got {error['input']!r})"


@dataclass(frozen=True)
class DataFiles(Generic[M]):
    """How one kind of hardware file is named and read.

    ``noun`` names a built-in in errors ("device"), ``file`` the file ("device profile"),
    ``fields`` its mapping ("profile"), ``folder`` the package folder of the built-ins.
    """

    model: type[M]
    noun: str
    file: str
    fields: str
    folder: str

    def parse(self, text: str, where: str) -> M:
        """Parse YAML text; every failure becomes a one-line DeviceError."""
        try:
            data = yaml.load(text, Loader=BoundedLoader)   # no alias bombs in a profile either
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise DeviceError(f"{where}: invalid YAML{at}: {getattr(exc, 'problem', exc)}") from exc
        if not isinstance(data, dict):
            raise DeviceError(f"{where}: expected a mapping of {self.fields} fields, got {type(data).__name__}")
        try:
            return self.model.model_validate(data)
        except ValidationError as exc:
            raise DeviceError(f"{where}: " + "; ".join(map(describe, exc.errors()))) from exc

    def builtins(self) -> dict[str, M]:
        """The shipped files by their ``name`` field, sorted."""
        folder = resources.files("graphexec.runtime") / self.folder
        found = [self.parse(f.read_text(encoding="utf-8"), f"{self.folder}/{f.name}")
                 for f in folder.iterdir() if f.name.endswith((".yaml", ".yml"))]
        named = sorted(((str(m.model_dump(include={"name"})["name"]), m) for m in found), key=lambda p: p[0])
        return dict(named)

    def load(self, name_or_path: str | Path | M, known: dict[str, M]) -> M:
        """A built-in name, a .yaml/.yml path, or a model (returned as is)."""
        if isinstance(name_or_path, self.model):
            return name_or_path
        if isinstance(name_or_path, str) and name_or_path.lower() in known:
            return known[name_or_path.lower()]
        path = Path(str(name_or_path))
        if path.suffix.lower() not in (".yaml", ".yml"):
            raise DeviceError(f"unknown {self.noun} {str(name_or_path)!r}; known: {', '.join(known)} "
                              f"(or give a .yaml/.yml {self.file.split()[-1]} path)")
        if path.exists() and not path.is_file():  # a folder, a device or a pipe
            raise DeviceError(f"{path}: cannot read {self.file}: not a regular file")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise DeviceError(f"{path}: cannot read {self.file}: {reason}") from exc
        return self.parse(text, str(path))
