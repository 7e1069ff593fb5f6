"""The free parameters of a device or system profile, named by their field path.

A calibration fits numbers that already exist in a profile (``kernels.cube.efficiency.default``,
``task_overhead_us``, ``collectives.fixed_us`` ...), so the fitter takes any dotted path the
profile's model has, including fields other code adds later; it never keeps a list of its
own. A path into a per-dtype table that is not there yet (``kernels.cube.efficiency.float32``)
starts from the table's ``default``. Bounds come from the field's own constraints (a
fraction stays in (0, 1]) intersected with a factor of ``SPREAD`` around the start value.
"""

from __future__ import annotations

import copy
import types
from dataclasses import dataclass
from typing import Annotated, Any, Mapping, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from graphexec.errors import CalibrationError
from graphexec.runtime.data_files import describe
from graphexec.runtime.profiles import DeviceProfile, load_profile
from graphexec.runtime.systems import SystemProfile, load_system

SPREAD = 100.0   # default bounds: the start value divided or multiplied by this


@dataclass(frozen=True)
class Param:
    """One free parameter: its path, start value and bounds (a fit moves it in log space)."""

    path: str
    start: float
    lower: float
    upper: float
    integer: bool


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """The type under Optional/Annotated and the constraints Annotated carried."""
    meta: list[Any] = []
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            base, *extra = get_args(annotation)
            meta += [m for e in extra for m in getattr(e, "metadata", [e])]
            annotation = base
        elif origin in (Union, types.UnionType):
            options = [a for a in get_args(annotation) if a is not type(None)]
            models = [a for a in options if isinstance(a, type) and issubclass(a, BaseModel)]
            annotation = (models or options)[0]
        else:
            return annotation, meta


def _leaf(model: type[BaseModel], parts: list[str]) -> tuple[Any, list[Any]]:
    """The leaf type and constraints of a dotted path in ``model`` (ValueError if none)."""
    current: Any = model
    meta: list[Any] = []
    for part in parts:
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(part)
            if info is None:
                raise ValueError(part)
            current, meta = _unwrap(info.annotation)
            meta += list(info.metadata)
        elif get_origin(current) is dict:
            current, meta = _unwrap(get_args(current)[1])
        else:
            raise ValueError(part)
    return current, meta


def _limits(meta: list[Any]) -> tuple[float, float]:
    """(lowest, highest) a field's constraints allow; strict bounds moved in by a hair."""
    low, high = 0.0, float("inf")
    for m in meta:
        if getattr(m, "gt", None) is not None:
            low = max(low, float(m.gt) * (1 + 1e-9) + 1e-12)
        if getattr(m, "ge", None) is not None:
            low = max(low, float(m.ge))
        if getattr(m, "lt", None) is not None:
            high = min(high, float(m.lt) * (1 - 1e-9))
        if getattr(m, "le", None) is not None:
            high = min(high, float(m.le))
    return low, high


class Target:
    """A device or system profile as data: numbers read and replaced by dotted path."""

    def __init__(self, profile: DeviceProfile | SystemProfile) -> None:
        self.profile = profile
        self.model: type[BaseModel] = type(profile)
        self.kind = "system" if isinstance(profile, SystemProfile) else "device"
        self.data: dict[str, Any] = profile.model_dump()
        if isinstance(profile, SystemProfile) and not isinstance(self.data["device"], dict):
            self.data["device"] = profile.device_profile.model_dump()   # so device.* paths can be fitted
        self.name = str(self.data["name"])

    @classmethod
    def load(cls, device: str | None, system: str | None) -> Target:
        if (device is None) == (system is None):
            raise CalibrationError("calibrate: give a device profile or a system profile to fit, one of the two")
        return cls(load_system(system) if system is not None else load_profile(str(device)))

    @property
    def device_profile(self) -> DeviceProfile:
        p = self.profile
        return p.device_profile if isinstance(p, SystemProfile) else p

    def value(self, path: str) -> float:
        """The number at ``path`` (a missing per-dtype entry: its table's ``default``)."""
        node: Any = self.data
        parts = path.split(".")
        for i, part in enumerate(parts):
            if not isinstance(node, dict):
                break
            if part not in node and i == len(parts) - 1 and "default" in node:
                part = "default"
            if part not in node:
                break
            node = node[part]
        else:
            if isinstance(node, (int, float)) and not isinstance(node, bool):
                return float(node)
        raise CalibrationError(f"calibrate: {self.kind} profile '{self.name}' has no number at '{path}'")

    def param(self, path: str, bounds: tuple[float, float] | None = None) -> Param:
        """``path`` as a free parameter, bounded by its field's constraints and ``bounds``
        (default: a factor of SPREAD either way of its value)."""
        start = self.value(path)
        try:
            leaf, meta = _leaf(self.model, path.split("."))
        except ValueError:
            raise CalibrationError(f"calibrate: '{path}' is not a field of a {self.kind} profile") from None
        if start <= 0:
            raise CalibrationError(f"calibrate: '{path}' is {start:g}; a fit moves a parameter by factors, "
                                   "so it needs a start value above 0")
        low, high = _limits(meta)
        lo, hi = bounds if bounds is not None else (start / SPREAD, start * SPREAD)
        lo, hi = max(lo, low, 1e-12), min(hi, high)
        if not lo <= start <= hi:
            raise CalibrationError(f"calibrate: '{path}' = {start:g} lies outside its bounds {lo:g}..{hi:g}")
        return Param(path, start, lo, hi, leaf is int)

    def build(self, values: Mapping[str, float], sources: Mapping[str, str] | None = None) -> Any:
        """A new profile with ``values`` at their paths (and ``sources`` for them)."""
        data = copy.deepcopy(self.data)
        for path, v in values.items():
            _put(data, path.split("."), v)
        for path in values:   # a new per-dtype entry needs a source before it validates
            text = (sources or {}).get(path)
            owner, key = (data["device"], path[len("device."):]) if path.startswith("device.") else (data, path)
            if text is not None or key not in owner["sources"]:
                owner["sources"][key] = text or "calibrate: being fitted"
        try:
            return self.model.model_validate(data)
        except ValidationError as exc:
            raise CalibrationError(f"calibrate: the fitted {self.kind} profile is not valid: "
                                   + "; ".join(map(describe, exc.errors()))) from exc


def _put(data: dict[str, Any], parts: list[str], value: float) -> None:
    node = data
    for part in parts[:-1]:
        node = node[part]
    old = node.get(parts[-1], node.get("default"))
    node[parts[-1]] = int(round(value)) if isinstance(old, int) and not isinstance(old, bool) else float(value)
