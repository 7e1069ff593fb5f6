"""The YAML execution-graph format as pydantic models: the boundary, nothing more.

These models only check the shape of the document (types, required fields, ranges);
what needs the whole graph (names that resolve, ops that exist, a schedule that is
safe) is checked in ``yaml_checks`` and ``yaml_schedule`` so every problem is found
in one pass. ``schemas/graph.schema.json`` is generated from :class:`GraphSpec`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WrapValidator, model_validator
from pydantic_core import PydanticCustomError


def _one_error(message: str) -> WrapValidator:
    """Replace pydantic's error per union member by one message that says what is allowed."""

    def check(value: Any, handler: Any) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError("invalid", message) from None

    return WrapValidator(check)


DType = Literal["float16", "float32", "float64", "int8", "int16", "int32", "int64",
                "uint8", "uint16", "uint32", "uint64", "bool", "string"]
DTYPES: tuple[str, ...] = get_args(DType)
INT64_MAX = 2**63 - 1  # ONNX dims are int64
OPSET_MAX = 2**31 - 1  # onnx's schema lookup takes an int32
Dim = Annotated[Annotated[int, Field(ge=0, le=INT64_MAX)] | str | None,
                _one_error("must be a size from 0 to 2**63-1, a symbolic name, or null for unknown")]
Priority = Annotated[int, Field(ge=0, le=7, description="stream priority: 0 (greatest) .. 7 (least), as in ACL")]
Name = Annotated[str, Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # a bool is no dim, "yes" no bool


class RandomInit(_Strict):
    """Deterministic normal values: ``default_rng(seed).standard_normal(shape) * std + mean``."""

    seed: int = 0
    mean: float = 0.0
    std: float = 1.0


class TensorSpec(_Strict):
    """A tensor: its type, and for a constant where its values come from; or a graph input or
    output of an ONNX container type (``kind``, and ``type`` in ONNX's notation)."""

    kind: Literal["tensor", "sequence", "map", "optional"] = "tensor"
    type: str | None = Field(None, description="a container's type in ONNX's notation, e.g. seq(tensor(float))")
    dtype: DType | None = None
    shape: list[Dim] | None = Field(None, description="dims: sizes, symbolic names, or null for unknown")
    value: Any = Field(None, description="a scalar (fills the shape) or a nested/flat list of values")
    file: str | None = Field(None, description=".npy or .npz file, relative to the YAML file")
    key: str | None = Field(None, description="array name inside a .npz file (default: the tensor name)")
    random: RandomInit | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "TensorSpec":
        sources = [k for k in ("value", "file", "random") if getattr(self, k) is not None]
        if len(sources) > 1:
            raise PydanticCustomError("sources", "give at most one of value, file, random (got {got})",
                                      {"got": ", ".join(sources)})
        if self.key is not None and self.file is None:
            raise PydanticCustomError("key", "key is only meaningful with file")
        if self.kind != "tensor" and (self.dtype or self.shape is not None or sources):
            raise PydanticCustomError("kind", "a {kind} takes type, not dtype, shape or values", {"kind": self.kind})
        if self.kind == "tensor" and self.type is not None:
            raise PydanticCustomError("type", "type is for a sequence, map or optional; a tensor takes dtype and shape")
        return self


class NodeSpec(_Strict):
    """One operation: any ONNX op or a registered custom kernel."""

    name: Name | None = None
    op: Name
    domain: str | None = Field(None, description="default: ONNX, or the custom domain that defines op")
    inputs: list[str] = Field(default_factory=list, description='"" for an omitted optional input')
    outputs: list[str] = Field(min_length=1)
    attributes: dict[str, Any] = Field(default_factory=dict)
    stream_label: Name | None = Field(None, description="nodes with the same label share a stream (GE STREAM_LABEL)")
    priority: Priority | None = None


class RecordItem(_Strict):
    record: Name


class WaitItem(_Strict):
    wait: Name


ScheduleItem = Annotated[Name | RecordItem | WaitItem,
                         _one_error("must be a node name, {record: EVENT} or {wait: EVENT}")]


class StreamSpec(_Strict):
    """One stream of a hand-written schedule: its tasks in launch order."""

    name: Name
    priority: Priority | None = None
    tasks: list[ScheduleItem] = Field(default_factory=list)


class ScheduleSpec(_Strict):
    """Explicit streams and events; graphexec checks it, it never adds a missing event."""

    streams: list[StreamSpec] = Field(min_length=1)
    synchronize: list[Name] | None = Field(None, description="streams the host synchronizes at the end (default all)")


class OptionsSpec(_Strict):
    """Device and session options the graph asks for."""

    device: Name | None = Field(None, description="built-in profile name, or a profile .yaml path relative to "
                                                  "the graph file and inside its folder")
    streams: Annotated[Annotated[int, Field(ge=1)] | Literal["auto"] | None,
                       _one_error("must be an int >= 1 or 'auto'")] = None
    policy: Name | None = None
    memory_reuse: bool | None = None
    fold: bool | None = None
    check_hazards: bool | None = None


class GraphSpec(_Strict):
    """A graphexec YAML execution graph."""

    version: Literal[1] = 1
    name: Name
    description: str | None = None
    opset: Annotated[int, Field(ge=1, le=OPSET_MAX)] | None = Field(
        None, description="default ONNX opset (default: newest known)")
    opsets: dict[str, Annotated[int, Field(ge=1, le=OPSET_MAX)]] = Field(default_factory=dict,
                                                                         description="other domains")
    inputs: list[Name] = Field(default_factory=list)
    outputs: list[Name] = Field(min_length=1)
    tensors: dict[str, TensorSpec] = Field(default_factory=dict)
    nodes: list[NodeSpec] = Field(default_factory=list)
    schedule: ScheduleSpec | None = None
    options: OptionsSpec | None = None
    onnx_functions: list[str] = Field(default_factory=list,
                                      description="model-local ONNX functions, base64 FunctionProto")


def graph_json_schema() -> dict[str, Any]:
    """The JSON Schema of the YAML graph format, for schemas/graph.schema.json."""
    schema = GraphSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "graphexec YAML execution graph"
    return schema
