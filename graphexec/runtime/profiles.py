"""Device profiles: the numbers the emulated NPU runs on, kept as data (YAML) not code.

A profile holds core counts, peak throughput, memory and runtime limits. Every number
carries a source (the facts doc or an "assumption: ..." with its reasoning), because
most figures for these chips are uncertain and a reader must be able to tell which.
Built-ins live in ``graphexec/runtime/profile_data/*.yaml``; users pass their own file.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from graphexec.errors import DeviceError
from graphexec.runtime.data_files import DataFiles
from graphexec.runtime.ranges import DEVICE
from graphexec.runtime.ranges import check as check_ranges

# strict: a YAML typo such as "32GiB" or "true" must not be coerced into a number.
Positive = Annotated[float, Field(gt=0, strict=True, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1, strict=True)]
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class PeakTflops(BaseModel):
    """Device-wide peak TFLOPS (TOPS for integers) per unit and dtype."""

    model_config = _FROZEN
    cube: dict[str, Positive] = Field(description="Matrix unit peak by dtype; needs float16.")
    vector: dict[str, Positive] = Field(description="Vector unit peak by dtype; needs float32.")

    @model_validator(mode="after")
    def _has_fallbacks(self) -> PeakTflops:
        # Unknown dtypes fall back to these, so they must exist.
        for unit, dtype in (("cube", "float16"), ("vector", "float32")):
            if dtype not in getattr(self, unit):
                raise ValueError(f"field 'peak_tflops.{unit}': needs a '{dtype}' entry")
        return self


class CopyBandwidth(BaseModel):
    """Memcpy bandwidth in GB/s (1e9 bytes/s) per direction."""

    model_config = _FROZEN
    h2d: Positive
    d2h: Positive
    d2d: Positive


ROLES = ("cube", "vector", "aicpu")   # the cost model's roles for a kernel, the keys of ``units``


class Unit(BaseModel):
    """One compute unit as its chip names it: what stats, trace counters and summaries call it."""

    model_config = _FROZEN
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$",
                      description="Identifier in stats (``units``), trace counters and summaries: a lower-case "
                                  "letter, then letters, digits or '_' (at most 32).")
    label: str = Field(min_length=1, max_length=64, description="What a person calls the unit, as in "
                                                                  "'tensor cores'.")
    core: str = Field(min_length=1, max_length=32, description="What one of its cores is called, as in 'SM'.")


class Units(BaseModel):
    """The profile's compute units by the role the cost model gives a kernel: ``cube`` the
    matrix unit (GEMM, convolution: Ascend's cube, a GPU's tensor cores), ``vector`` the unit
    of elementwise and reduction kernels (Ascend's vector unit, a GPU's CUDA cores), ``aicpu``
    the scalar processor that runs what no unit kernel implements. The roles are how counts
    and peaks are keyed (``ai_cores``, ``peak_tflops.cube``, ``kernels.vector``); the names
    are what a run reports. Left out: Ascend's names."""

    model_config = _FROZEN
    cube: Unit = Unit(name="cube", label="cube units", core="AI Core")
    vector: Unit = Unit(name="vector", label="vector units", core="AI Core")
    aicpu: Unit = Unit(name="aicpu", label="AI CPU", core="AI CPU core")

    @model_validator(mode="after")
    def _distinct(self) -> Units:
        seen: dict[str, str] = {}
        for role in ROLES:
            name = getattr(self, role).name
            if name in seen:
                raise ValueError(f"field 'units.{role}.name': {name!r} already names units.{seen[name]}")
            if name in ROLES and name != role:   # 'vector' naming the matrix unit would read as the other role
                raise ValueError(f"field 'units.{role}.name': {name!r} is the name of another role")
            seen[name] = role
        return self

    def names(self) -> dict[str, str]:
        """Role -> the unit's name."""
        return {role: getattr(self, role).name for role in ROLES}


Fraction = Annotated[float, Field(gt=0, le=1, strict=True, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, strict=True, allow_inf_nan=False)]


class UnitKernels(BaseModel):
    """How real kernels of one unit use its cores (``kernel_time.py`` turns these into time).

    A kernel's cost rule counts its work in tiles (cube: 16x16 output fractals; vector:
    32 KiB of output); ``split`` tiles make one work item, the unit a kernel divides among
    its blocks. CANN launches min(items, cores) blocks and loops the items inside a block.
    """

    model_config = _FROZEN
    split: Count = Field(description="Cost tiles per work item (the finest split among blocks).")
    block_fixed_us: NonNegative = Field(description="Fixed time of one block: start, tiling read, final sync.")
    item_fill_us: NonNegative = Field(description="Pipeline fill and drain of one work item (paid per item).")
    efficiency: dict[str, Fraction] = Field(description="Achieved fraction of the peak rate by dtype; "
                                                        "'default' for the rest.")
    op_efficiency: dict[str, Fraction] | None = Field(
        None, description="Achieved fraction of the peak rate by op class (the ONNX op type of the kernel's "
                          "node, a fused kernel's first op), in place of 'efficiency' for that class; none: "
                          "every class at 'efficiency'.")
    lone_efficiency: Fraction | None = Field(
        None, description="Fraction of 'efficiency' a block reaches when it runs a single work item: no "
                          "second item is resident on its core to hide the first one's load latency (a GPU "
                          "SM holding one CTA); none: 1.")
    group_c0: Count | None = Field(
        None, description="Channels of one cube fractal (C0): a grouped convolution's per-group input and "
                          "output channels are padded to it after CANN's group enlarge (kernel_time."
                          "group_padding); none: no padding.")

    @model_validator(mode="after")
    def _has_default(self) -> UnitKernels:
        if "default" not in self.efficiency:
            raise ValueError("field 'efficiency': needs a 'default' entry")
        return self


class KernelModel(BaseModel):
    """Achieved rates and on-chip memory: what turns a kernel's work into time."""

    model_config = _FROZEN
    cube: UnitKernels
    vector: UnitKernels
    l2_bytes: Count = Field(description="On-chip L2 capacity in front of HBM.")
    l2_bandwidth_gbps: Positive = Field(description="GB/s the cores read from L2 when the data is there.")


class Layout(BaseModel):
    """The activation format the chip's cube ops keep 4-D tensors in (``passes/layout.py``
    puts a TransData wherever an op needs the plain NCHW one instead)."""

    model_config = _FROZEN
    format: Literal["nc1hwc0"] = Field(description="NC1HWC0 (5HD): C in C1 blocks of C0 channels, C0 innermost.")
    c0: Count = Field(description="Channels per C0 block (16 for 16- and 32-bit types on DaVinci).")
    strided_concat: bool = Field(False, description="Convolutions write a channel Concat's C0-aligned slices "
                                                    "in place at any batch (CANN's ConvConcatFusionPass, "
                                                    "StridedWrite); off: only where the slices are contiguous.")


class DeviceProfile(BaseModel):
    """One emulated NPU: cores, peak throughput, memory and runtime limits."""

    model_config = _FROZEN
    name: str = Field(min_length=1)
    description: str
    ai_cores: Count = Field(description="Cube-capable AI cores.")
    vector_cores: Count = Field(description="Vector cores (equal to ai_cores when coupled).")
    coupled: bool = Field(description="True: one core does cube and vector work (910, 310P).")
    aicpu_cores: Count = Field(description="AI CPU cores that run AI CPU kernels.")
    aicpu_gflops_per_core: Positive = Field(description="GFLOP/s of one AI CPU core on scalar kernel code.")
    peak_tflops: PeakTflops
    hbm_capacity_bytes: Count
    hbm_bandwidth_gbps: Positive = Field(description="GB/s, shared by running tasks.")
    task_overhead_us: Positive = Field(description="Fixed device-side time per task.")
    launch_cost_us: Positive = Field(description="Host time to launch one task.")
    sync_return_us: NonNegative | None = Field(
        None, description="Host time from the device (or the stream, event) finishing to a synchronize call "
                          "returning, before the host can launch again; none: 0 (it returns at once).")
    queue_depth: Count = Field(description="Command-queue depth per stream.")
    max_streams: Count
    max_events: Count
    max_tasks_per_stream: Count
    copy_bandwidth_gbps: CopyBandwidth
    kernels: KernelModel | None = Field(None, description="Achieved rates and L2; none: every kernel at peak "
                                                          "rate, all bytes from HBM (a plain roofline).")
    units: Units = Field(Units(), description="The compute units' own names by role; left out: Ascend's.")
    layout: Layout | None = Field(None, description="The cube's activation format and its conversions; none: "
                                                    "every op reads and writes the plain layout (a GPU).")
    sources: dict[str, str] = Field(
        description="Dotted numeric field -> where its number comes from."
    )

    @model_validator(mode="before")
    @classmethod
    def _plausible(cls, data: Any) -> Any:
        check_ranges(data, DEVICE)   # before any field is parsed or anything is sized from one
        return data

    @model_validator(mode="after")
    def _check(self) -> DeviceProfile:
        if self.coupled and self.vector_cores != self.ai_cores:
            raise ValueError(f"field 'vector_cores': must equal ai_cores ({self.ai_cores}) "
                             f"when coupled is true (got {self.vector_cores})")
        numeric = set(_numeric_fields(self.model_dump(exclude={"sources"})))
        if missing := sorted(numeric - self.sources.keys()):
            raise ValueError(f"field 'sources': no entry for {', '.join(missing)}")
        if unknown := sorted(self.sources.keys() - numeric):
            raise ValueError(f"field 'sources': entries for unknown fields {', '.join(unknown)}")
        if empty := sorted(k for k, v in self.sources.items() if not v.strip()):
            raise ValueError(f"field 'sources': empty entries for {', '.join(empty)}")
        return self

    def cube_flops_per_us_per_core(self, dtype: str) -> float:
        """Peak cube flops per microsecond of one AI core; unknown dtypes run as float16."""
        cube = self.peak_tflops.cube
        return cube.get(dtype, cube["float16"]) * 1e6 / self.ai_cores

    def vector_flops_per_us_per_core(self, dtype: str) -> float:
        """Peak vector flops per microsecond of one vector core; unknown dtypes as float32."""
        vector = self.peak_tflops.vector
        return vector.get(dtype, vector["float32"]) * 1e6 / self.vector_cores

    def unit_rate(self, unit: str, dtype: str) -> float:
        """Peak flops per microsecond of one core of ``unit`` ("cube", "vector", "aicpu")
        at ``dtype``: the one roofline rate every simulation, bound and summary uses."""
        if unit == "cube":
            return self.cube_flops_per_us_per_core(dtype)
        if unit == "vector":
            return self.vector_flops_per_us_per_core(dtype)
        return self.aicpu_gflops_per_core * 1e3

    def unit_cores(self, unit: str) -> int:
        """How many cores can run blocks of ``unit`` at once."""
        if unit == "aicpu":
            return self.aicpu_cores
        return self.vector_cores if unit == "vector" and not self.coupled else self.ai_cores

    def unit_name(self, role: str) -> str:
        """The profile's name of the unit that runs kernels of ``role`` (a role it lacks: the role)."""
        unit = getattr(self.units, role, None) if role in ROLES else None
        return unit.name if unit is not None else role

    def describe_units(self) -> list[dict[str, Any]]:
        """Each unit with its role, names, core count and peak per dtype (TFLOPS; the scalar
        unit's per core in GFLOP/s): what ``graphexec devices`` and reports show."""
        out = []
        for role in ROLES:
            unit = getattr(self.units, role)
            peak = (dict(getattr(self.peak_tflops, role)) if role != "aicpu"
                    else {"gflops_per_core": self.aicpu_gflops_per_core})
            out.append({"role": role, **unit.model_dump(), "cores": self.unit_cores(role), "peak": peak})
        return out

    @property
    def hbm_bytes_per_us(self) -> float:
        """Device-wide HBM bandwidth in bytes per microsecond."""
        return self.hbm_bandwidth_gbps * 1e3

    def copy_bytes_per_us(self, kind: str) -> float:
        """Memcpy bandwidth in bytes per microsecond for kind 'h2d', 'd2h' or 'd2d'."""
        key = kind.lower()
        if key not in _COPY_KINDS:
            raise DeviceError(f"device '{self.name}': unknown copy kind {kind!r}; known: {', '.join(_COPY_KINDS)}")
        return getattr(self.copy_bandwidth_gbps, key) * 1e3


_COPY_KINDS = tuple(CopyBandwidth.model_fields)   # read once: pydantic's class property costs 20 us a read


def _numeric_fields(data: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of every int/float leaf (bools excluded) in a dumped model."""
    names: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict):
            names += _numeric_fields(value, f"{prefix}{key}.")
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            names.append(prefix + key)
    return names


FILES = DataFiles(DeviceProfile, "device", "device profile", "profile", "profile_data")


@functools.cache
def _builtins() -> dict[str, DeviceProfile]:
    return FILES.builtins()


def builtin_profiles() -> dict[str, DeviceProfile]:
    """The shipped profiles by name, sorted (a fresh dict; the profiles are frozen)."""
    return dict(_builtins())


def load_profile(name_or_path: str | Path | DeviceProfile) -> DeviceProfile:
    """A profile from a built-in name, a .yaml/.yml path, or a profile (returned as is)."""
    return FILES.load(name_or_path, _builtins())


def profile_json_schema() -> dict[str, Any]:
    """JSON Schema of a profile file, for editors and ``schemas/device.schema.json``."""
    return DeviceProfile.model_json_schema()
