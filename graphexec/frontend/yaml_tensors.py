"""Tensors and attributes of a YAML graph: plain YAML values to numpy and back.

Everything here is exact both ways, which is what keeps YAML round trips
bit-identical: a float32 becomes a Python float (a float64 holding the same value),
PyYAML writes its shortest repr, and reading it back gives the same float32.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, cast, overload

import numpy as np
import onnx

from graphexec._arrays import ArrayFileError, header, read
from graphexec._files import inside
from graphexec.frontend.yaml_schema import DTYPES, TensorSpec
from graphexec.ir import TensorType
from graphexec.ir.onnx_proto import type_proto, type_text

GENERATED_MAX_BYTES = 1 << 30  # hostile shapes must not fill the host's memory while loading
_TAGS = ("tensor", "graph", "graphs", "ints", "floats", "strings")


class TypedList(list):
    """A list attribute that knows its ONNX type: an empty one has no other way to say it."""

    def __init__(self, items: list, attr_type: int) -> None:
        super().__init__(items)
        self.attr_type = attr_type


@overload
def np_dtype(name: str) -> np.dtype: ...
@overload
def np_dtype(name: None) -> None: ...
@overload
def np_dtype(name: str | None) -> np.dtype | None: ...
def np_dtype(name: str | None) -> np.dtype | None:
    """A YAML dtype name as numpy's ("string" is numpy's object dtype, as in the IR)."""
    if name is None:
        return None
    return np.dtype(object) if name == "string" else np.dtype(name)


def dtype_name(dtype: np.dtype | None) -> str | None:
    """The YAML name of a numpy dtype; ValueError for one YAML cannot hold."""
    if dtype is None:
        return None
    if dtype == np.dtype(object):
        return "string"
    if dtype.name not in DTYPES:
        raise ValueError(f"dtype {dtype} has no YAML form")
    return dtype.name


def tensor_type(spec: TensorSpec) -> TensorType:
    """The declared type of a tensor spec (parts not given stay unknown); ValueError for a
    container type that is not ONNX's notation of its kind."""
    if spec.kind != "tensor":
        return container_type(spec.kind, spec.type)
    shape = None if spec.shape is None else tuple(spec.shape)
    return TensorType(np_dtype(spec.dtype), shape)


def constant(name: str, spec: TensorSpec, base: Path) -> tuple[str, np.ndarray | None, str | None]:
    """The constant value of a tensor spec: (field at fault, array, problem).

    The array is None when the tensor has no value, file or random initializer.
    """
    try:
        if spec.value is not None:
            return "value", _from_value(spec), None
        if spec.file is not None:
            return "file", _from_file(name, spec, base), None
        if spec.random is not None:
            return "random", _from_random(spec), None
    except (ValueError, TypeError, OverflowError, OSError, KeyError) as e:
        field = "value" if spec.value is not None else ("file" if spec.file is not None else "random")
        return field, None, f"tensor {name!r}: {e}"
    return "", None, None


def _static_shape(spec: TensorSpec) -> tuple[int, ...] | None:
    if spec.shape is None:
        return None
    if not all(isinstance(d, int) for d in spec.shape):
        raise ValueError(f"a constant needs a static shape, not {list(spec.shape)}")
    return cast("tuple[int, ...]", tuple(spec.shape))  # every dim is an int (checked above)


def _generated_shape(spec: TensorSpec) -> tuple[int, ...] | None:
    """The static shape of a constant graphexec fills or draws, checked before it is allocated."""
    shape = _static_shape(spec)
    if shape is not None and spec.dtype is not None:
        t = TensorType(np_dtype(spec.dtype), shape)
        if t.is_static and t.nbytes > GENERATED_MAX_BYTES:
            raise ValueError(f"{t} needs {t.nbytes} bytes; a constant filled from a value or drawn at random "
                             f"may take at most {GENERATED_MAX_BYTES} (keep bigger ones in a file)")
    return shape


def _from_value(spec: TensorSpec) -> np.ndarray:
    if spec.dtype is None:
        raise ValueError("a value needs a dtype")
    arr = np.array(spec.value, dtype=np_dtype(spec.dtype))
    shape = _generated_shape(spec)
    if shape is None or arr.shape == shape:
        return arr
    if arr.ndim == 0:
        return np.full(shape, arr, dtype=arr.dtype)
    if arr.size != int(np.prod(shape, dtype=np.int64)):
        raise ValueError(f"value has {arr.size} elements, shape {list(shape)} needs {int(np.prod(shape))}")
    return arr.reshape(shape)


def _from_file(name: str, spec: TensorSpec, base: Path) -> np.ndarray:
    """The array a ``file:`` entry names, read only after its header matches the declaration.

    The file must stay in the model's folder (symlinks resolved); a header that holds
    objects, disagrees with the declared dtype or shape, or needs more than the host
    budget is refused before any data is read.
    """
    assert spec.file is not None  # the caller's branch for a file entry
    path = inside(base, spec.file)
    if path is None:
        raise ValueError(f"file {spec.file!r} is outside the model's folder {base}")
    if not path.is_file() and not path.exists():
        raise ValueError(f"file {spec.file!r} not found (looked in {base})")
    key = spec.key or name
    try:
        head = header(path, key)
    except ArrayFileError as e:
        raise ValueError(f"file {spec.file!r}: {e}") from None
    if spec.dtype is not None and head.dtype != np_dtype(spec.dtype):
        raise ValueError(f"{spec.file} holds {head.dtype}, the tensor is declared {spec.dtype}")
    shape = _static_shape(spec)
    if shape is not None and head.shape != shape:
        raise ValueError(f"{spec.file} holds shape {list(head.shape)}, the tensor is declared {list(shape)}")
    try:
        return read(path, key)
    except ArrayFileError as e:
        raise ValueError(f"file {spec.file!r}: {e}") from None


def _from_random(spec: TensorSpec) -> np.ndarray:
    shape = _generated_shape(spec)
    if shape is None or spec.dtype is None or np_dtype(spec.dtype).kind != "f":
        raise ValueError("random values need a float dtype and a shape")
    r = spec.random
    assert r is not None  # the caller's branch for a random entry
    values = np.random.default_rng(r.seed).standard_normal(shape) * r.std + r.mean
    return values.astype(np_dtype(spec.dtype))


def decode_attr(value: Any) -> Any:
    """A YAML attribute value as the IR holds it (tagged mappings for what YAML lacks)."""
    if not isinstance(value, dict):
        return value
    if len(value) != 1 or next(iter(value)) not in _TAGS:
        raise ValueError(f"a mapping attribute must be one of {', '.join('{' + t + ': ...}' for t in _TAGS)}")
    tag, body = next(iter(value.items()))
    if tag == "tensor":
        spec = TensorSpec.model_validate(body)
        return _from_value(spec)
    if tag in ("graph", "graphs"):
        items = [body] if tag == "graph" else list(body)
        graphs = [onnx.GraphProto.FromString(base64.b64decode(b)) for b in items]
        return graphs[0] if tag == "graph" else graphs
    kind = {"ints": (int, onnx.AttributeProto.INTS), "floats": (float, onnx.AttributeProto.FLOATS),
            "strings": (str, onnx.AttributeProto.STRINGS)}[tag]
    return TypedList([kind[0](v) for v in body], kind[1])


def encode_attr(value: Any, attr_type: int | None = None) -> Any:
    """An IR attribute value in its YAML form (the inverse of :func:`decode_attr`).

    ``attr_type`` (an ``AttributeProto`` type) names the type of an empty list,
    which YAML alone cannot tell.
    """
    if isinstance(value, np.ndarray):
        return {"tensor": tensor_entry(value, inline=True)}
    if isinstance(value, onnx.GraphProto):
        return {"graph": base64.b64encode(value.SerializeToString()).decode()}
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], onnx.GraphProto):
        return {"graphs": [base64.b64encode(g.SerializeToString()).decode() for g in value]}
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
        raise ValueError("lists of tensor attributes have no YAML form")
    if isinstance(value, (list, tuple)) and not value:
        tags: dict[int | None, str] = {onnx.AttributeProto.FLOATS: "floats", onnx.AttributeProto.STRINGS: "strings"}
        return {tags.get(attr_type, "ints"): []}
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    return list(value) if isinstance(value, tuple) else value


def tensor_entry(arr: np.ndarray, inline: bool, file: str | None = None, key: str | None = None) -> dict[str, Any]:
    """The YAML entry of a constant: dtype, shape, and its value inline or in a file."""
    entry: dict[str, Any] = {"dtype": dtype_name(arr.dtype), "shape": [int(d) for d in arr.shape]}
    if inline:
        entry["value"] = arr.tolist()
    else:
        entry["file"] = file
        if key is not None:
            entry["key"] = key
    return entry


_HEADS = {"sequence": "seq(", "map": "map(", "optional": "optional("}


def container_type(kind: str, text: str | None) -> TensorType:
    """A container's TensorType from its kind and its type in ONNX's notation (checked)."""
    if text is None:
        return TensorType(kind=kind)
    proto = type_proto(text)   # ValueError if malformed
    if not text.replace(" ", "").startswith(_HEADS[kind]):
        raise ValueError(f"type {text!r} is not a {kind}")
    return TensorType(kind=kind, elem=type_text(proto))
