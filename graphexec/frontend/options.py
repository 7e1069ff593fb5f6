"""A graph's options, its hand-written schedule and its nodes' stream annotations, validated
one way wherever they come from: a YAML file's fields or an ONNX file's metadata.

Both go through the pydantic models of ``yaml_schema`` (strict: a bool is no int, a
string no bool) and then :func:`settle_options`, which also keeps a device profile the
model names inside the model's own folder; an ONNX file's schedule then gets the same
whole-graph check (``yaml_schedule``) a YAML file's does.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path as FsPath
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError

from graphexec._files import inside
from graphexec.errors import GraphExecError, ModelLoadError
from graphexec.frontend.yaml_schema import Name, OptionsSpec, Priority, ScheduleSpec
from graphexec.frontend.yaml_source import Path, render_path

PROFILE_SUFFIXES = (".yaml", ".yml")


def settle_options(spec: OptionsSpec, base: FsPath | None) -> tuple[dict[str, Any], list[tuple[Path, str]]]:
    """The options as plain data, and their problems as (field path, message).

    A device profile path is resolved against ``base`` (the model's folder) and must stay
    in it; the answer is the same whether or not a file outside exists.
    """
    from graphexec.runtime.profiles import builtin_profiles

    options = spec.model_dump(exclude_none=True)
    device, where = spec.device, ("options", "device")
    if device is None:
        return options, []
    if device.endswith(PROFILE_SUFFIXES):
        resolved = None if base is None else inside(base, device)
        if resolved is not None:
            options["device"] = str(resolved)
            return options, []
        why = (f"is outside the model's folder {base}" if base is not None else
               "names a file, but a model given as bytes or a proto has no folder; load it from its path")
        return options, [(where, f"device profile {device!r} {why}")]
    known = sorted(builtin_profiles())
    if device not in known:
        return options, [(where, f"unknown device {device!r}; known: {', '.join(known)} "
                                 "(or give a .yaml/.yml profile path)")]
    return options, []


def check_session_options(**values: Any) -> None:
    """Refuse Session keyword options of the wrong type with the YAML ``options`` model
    (``fold="no"`` is no bool, ``policy=5`` no name); None means "not given", and a
    DeviceProfile object is left to the caller. Raises GraphExecError naming the option."""
    given = {k: v for k, v in values.items() if v is not None and not (k == "device" and not isinstance(v, str))}
    try:
        OptionsSpec.model_validate(given)
    except ValidationError as e:
        raise GraphExecError(_first(e, given)) from None


def plain_schedule(schedule: ScheduleSpec) -> dict[str, Any]:
    """The schedule as plain data, each task one of {run: node}, {record: ev}, {wait: ev}."""
    streams = []
    for s in schedule.streams:
        tasks = [{"run": t} if isinstance(t, str) else t.model_dump() for t in s.tasks]
        streams.append({"name": s.name, "priority": s.priority, "tasks": tasks})
    sync = schedule.synchronize or [s.name for s in schedule.streams]
    return {"streams": streams, "synchronize": list(sync)}


def meta_options(value: Any, base: FsPath | None, where: str) -> dict[str, Any]:
    """The ``graphexec.options`` metadata of an ONNX file, or ModelLoadError naming the option."""
    spec = _validated(OptionsSpec, value, where, "options")
    options, problems = settle_options(spec, base)
    if problems:
        path, message = problems[0]
        raise ModelLoadError(f"{where}: metadata graphexec.options: {render_path(path[1:])}: {message}")
    return options


def meta_schedule(value: Any, where: str) -> dict[str, Any]:
    """The ``graphexec.schedule`` metadata (plain form, as written) through the YAML model."""
    return plain_schedule(_validated(ScheduleSpec, _spec_form(value), where, "schedule"))


def meta_node(key: str, value: Any, node: str, where: str) -> Any:
    """A node's ``graphexec.stream_label`` or ``graphexec.priority``, checked as YAML checks it."""
    problem = annotation_problem(key, value)
    if problem:
        raise ModelLoadError(f"{where}: node {node}: metadata graphexec.{key}: {problem}")
    return value


def annotation_problem(key: str, value: Any) -> str | None:
    """What is wrong with a node's ``stream_label`` or ``priority`` (the YAML field's type), or None."""
    try:
        _adapter(key).validate_python(value)
    except ValidationError as e:
        return _first(e)
    return None


@cache
def _adapter(key: str) -> TypeAdapter:
    kind = {"stream_label": Name, "priority": Priority}[key]
    return TypeAdapter(kind, config=ConfigDict(strict=True))


def _validated(model: Any, value: Any, where: str, key: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as e:
        raise ModelLoadError(f"{where}: metadata graphexec.{key}: {_first(e, value)}") from None


def _first(e: ValidationError, data: Any = None) -> str:
    """pydantic's first error as 'field: message', the field as a path into ``data``."""
    err = e.errors()[0]
    path: list = []
    for key in err["loc"]:  # pydantic adds labels (union members, validators) that are no field
        if isinstance(data, dict) and key in data:
            data = data[key]
            path.append(key)
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
            path.append(key)
        elif isinstance(data, dict) and key == err["loc"][-1] and err["type"] == "missing":
            path.append(key)
    loc = render_path(tuple(path))
    if not path and err["type"] in ("model_type", "dict_type"):
        err["msg"] = "must be a JSON object"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return (f"{loc}: {err['msg']}" if loc else err["msg"]) + more


def _spec_form(value: Any) -> Any:
    """Plain tasks ({run: node}) as the YAML form writes them (node); anything else as it is,
    for the model to refuse."""
    if not isinstance(value, dict) or not isinstance(value.get("streams"), list):
        return value
    streams = []
    for s in value["streams"]:
        if isinstance(s, dict) and isinstance(s.get("tasks"), list):
            tasks = [t["run"] if isinstance(t, dict) and list(t) == ["run"] else t for t in s["tasks"]]
            s = {**s, "tasks": tasks}
        streams.append(s)
    return {**value, "streams": streams}
