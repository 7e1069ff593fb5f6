"""The JSON Schema of every ``--json`` output (``schemas/cli.schema.json``, made by
``schemas/generate.py``): the envelope (``schema_version``, ``command``), what each command
must hold, and the vocabulary, checked at every depth of every document: a key of
``VOCABULARY`` has one type and one meaning wherever it appears."""

from __future__ import annotations

from typing import Any

from graphexec.cli.jsonout import SCHEMA_VERSION

_NUM = {"type": "number"}
_US = {"type": "number", "minimum": 0, "description": "simulated device time, microseconds"}
_BYTES = {"type": "integer", "minimum": 0, "description": "bytes"}
_COUNT = {"type": "integer", "minimum": 0}
_FRACTION = {"type": "number", "minimum": 0, "maximum": 1, "description": "a fraction (1.0 = 100%)"}

VOCABULARY: dict[str, dict[str, Any]] = {
    "makespan_us": {**_US, "description": "simulated device time from the first task's start to the last's end, us"},
    "lower_bound_us": {**_US, "description": "the makespan no schedule can beat, us"},
    "comm_us": {**_US, "description": "device time of communication (collectives, copies over links), us"},
    "speedup": {"type": ["number", "null"], "exclusiveMinimum": 0,
                "description": "the baseline's makespan over this one (the baseline is named beside it)"},
    "streams": {"oneOf": [{"type": "integer", "minimum": 1}, {"const": "auto"}],
                "description": "stream count asked for (per card with several cards)"},
    "num_streams": {**_COUNT, "description": "streams the schedule uses"},
    "num_events": {**_COUNT, "description": "event waits after pruning"},
    "num_tasks": _COUNT, "num_nodes": _COUNT,
    "peak_bytes": {**_BYTES, "description": "high-water mark of the activation pool"},
    "lower_bound_bytes": _BYTES, "no_reuse_bytes": _BYTES, "io_bytes": _BYTES, "comm_bytes": _BYTES,
    "weight_bytes": {**_BYTES, "description": "bytes of the weights (initializers and constants)"},
    "cube_utilization": _FRACTION, "vector_utilization": _FRACTION, "hbm_utilization": _FRACTION,
    "comm_hidden": {**_FRACTION, "description": "share of communication time overlapped by compute"},
    "schema_version": {"const": SCHEMA_VERSION},
    "model": {"type": "string", "description": "the model file as given"},
}

_REQUIRED: dict[str, list[str]] = {
    "run": ["model", "device", "inputs", "outputs", "stats", "diagnosis"],
    "compare": ["rows", "identical", "baseline"],
    "plan": ["model", "device"],
    "validate": ["graph", "ok", "problems"],
    "convert": ["input", "written"],
    "devices": ["devices", "systems"],
    "inspect": ["model", "inputs", "outputs", "opsets", "ops", "own_kernels", "fallback", "weight_bytes"],
    "sweep": ["rows"],
    "diff": [], "decode": ["model", "device"], "calibrate": ["target", "params", "rows"],
}

_TENSOR = {"type": "object", "required": ["name", "kind", "dtype", "shape", "symbolic"],
           "properties": {"name": {"type": "string"}, "dtype": {"type": ["string", "null"]},
                          "shape": {"type": ["array", "null"], "items": {"type": ["integer", "string", "null"]}},
                          "symbolic": {"type": "array", "items": {"type": "string"}}}}
_MORE: dict[str, dict[str, Any]] = {
    "run": {"stats": {"type": "object", "required": ["makespan_us", "num_tasks", "peak_bytes"]},
            "inputs": {"type": "object", "additionalProperties": {"type": "object", "required": ["made"]}}},
    "compare": {"rows": {"type": "array", "items": {"type": "object", "required": ["makespan_us", "speedup"]}},
                "baseline": {"type": "object", "required": ["label", "makespan_us", "row"]}},
    "inspect": {"inputs": {"type": "array", "items": _TENSOR}, "outputs": {"type": "array", "items": _TENSOR},
                "ops": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}},
    "sweep": {"rows": {"type": "array", "items": {"type": "object", "required": ["model", "streams", "speedup"]}}},
}


def cli_json_schema() -> dict[str, Any]:
    """The schema: an envelope, each command's required keys, the vocabulary at every depth."""
    node = {"$comment": "any value; an object's vocabulary keys have their one type, at every depth",
            "anyOf": [{"type": ["string", "number", "boolean", "null"]},
                      {"type": "array", "items": {"$ref": "#/$defs/node"}},
                      {"type": "object", "properties": {k: {"$ref": f"#/$defs/vocabulary/{k}"} for k in VOCABULARY},
                       "additionalProperties": {"$ref": "#/$defs/node"}}]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://graphexec.invalid/schemas/cli-{SCHEMA_VERSION}.schema.json",
        "title": "graphexec --json output", "version": SCHEMA_VERSION,
        "description": "Every graphexec command's --json document. The version's minor number grows when keys are "
                       "added, its major number when a key changes meaning or type.",
        "type": "object", "required": ["schema_version", "command"],
        "properties": {"command": {"enum": sorted(_REQUIRED)}},
        "allOf": [{"$ref": "#/$defs/node"}] + [
            {"if": {"properties": {"command": {"const": c}}},
             "then": {"required": req, "properties": _MORE.get(c, {})}} for c, req in sorted(_REQUIRED.items())],
        "$defs": {"vocabulary": VOCABULARY, "node": node},
    }
