"""System profiles: a server of cards (how many, which chip, how they are linked), as data.

A system names a device profile, a device count and a compact topology: devices split
into groups, one link spec inside a group and one between groups (a single group is a
full mesh). ``link(a, b)`` answers for every ordered pair, with the ``resource`` a
transfer occupies: transfers that name the same resource split its bandwidth. Every
number and every peer-access answer carries a source, as in device profiles.
Built-ins live in ``graphexec/runtime/system_data/*.yaml``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, StrictBool, ValidationError, field_validator, model_validator

from graphexec.errors import DeviceError
from graphexec.runtime.data_files import DataFiles, describe
from graphexec.runtime.profiles import _FROZEN, Count, DeviceProfile, Positive, builtin_profiles
from graphexec.runtime.ranges import SYSTEM
from graphexec.runtime.ranges import check as check_ranges

# aclrtGetDevicesTopo values: acl_rt.h (hicann/runtime include/external/acl/acl_rt.h) and the
# CANN API reference aclcppdevg_03_1895 ("ACL_RT_DEVS_TOPOLOGY_*"; 0x04 PIB is reserved).
DEVICES_TOPO_HCCS = 0x01
DEVICES_TOPO_PIX = 0x02
DEVICES_TOPO_PHB = 0x08
DEVICES_TOPO_SYS = 0x10
DEVICES_TOPO_SIO = 0x20
DEVICES_TOPO_HCCS_SW = 0x40

LinkKind = Literal["HCCS", "HCCS_SW", "PCIe", "PHB", "SYS", "SIO", "RDMA", "NVLink"]
_TOPO = {"HCCS": DEVICES_TOPO_HCCS, "HCCS_SW": DEVICES_TOPO_HCCS_SW, "PCIe": DEVICES_TOPO_PIX,
         "PHB": DEVICES_TOPO_PHB, "SYS": DEVICES_TOPO_SYS, "SIO": DEVICES_TOPO_SIO,
         # RDMA leaves the PCIe tree through a NIC; the API has no value for it, so the
         # farthest relation it names (assumption).
         "RDMA": DEVICES_TOPO_SYS,
         # a GPU's NVLink reaches its peers through a switch (NVSwitch), the API's nearest relation
         # (assumption: ACL names no NVLink)
         "NVLink": DEVICES_TOPO_HCCS_SW}
Latency = Annotated[float, Field(ge=0, strict=True, allow_inf_nan=False)]
Index = Annotated[int, Field(strict=True)]


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One directed path: its kind, GB/s per direction, start latency, shared channel."""

    kind: str
    bandwidth_gbps: float
    latency_us: float
    resource: str
    ports: tuple[str, ...] = ()   # a switch's: the sender's egress and the receiver's ingress port

    @property
    def bytes_per_us(self) -> float:
        return self.bandwidth_gbps * 1e3

    @property
    def channels(self) -> tuple[str, ...]:
        """The fabric channels a transfer over this path occupies (each at ``bandwidth_gbps``)."""
        return self.ports or (self.resource,)


class _Path(BaseModel):
    model_config = _FROZEN
    bandwidth_gbps: Positive = Field(description="GB/s (1e9 B/s) per direction.")
    latency_us: Latency = Field(description="Fixed time before the first byte arrives.")


class LinkModel(_Path):
    """A device-to-device link spec as written in YAML."""

    kind: LinkKind
    peer_access: StrictBool = Field(description="What aclrtDeviceCanAccessPeer answers over this link.")
    shared: Literal["pair", "group", "switch"] = Field(
        "pair", description="pair: one channel per directed device pair; group: one channel per "
                            "directed group pair (or per group, inside a group), split by its transfers; "
                            "switch: every device has one port into a switch plane (NVSwitch, an HCCS "
                            "switch), its egress and ingress each at the bandwidth, full duplex.")


class HostLinkModel(_Path):
    """Each device's own path to host memory (h2d and d2h share it)."""

    kind: Literal["PCIe", "PHB"]


class NetworkModel(_Path):
    """Each device's NIC to other servers (scale-out), one channel per device."""

    kind: Literal["RDMA"]


class CollectiveModel(BaseModel):
    """What a collective library adds to the links' alpha-beta cost (NCCL, HCCL).

    A collective pays ``fixed_us`` once (its kernel launch, the ranks' synchronisation,
    protocol setup); each flow puts ``(bytes + min(bytes, slice_bytes)) / efficiency`` on
    the wire: the protocol's own bytes (flags, headers) and one slice more while the
    pipeline of slices fills, so a step's bandwidth ramps up with the message size."""

    model_config = _FROZEN
    fixed_us: Latency = Field(description="Once per collective: launch, synchronisation, protocol setup.")
    efficiency: Annotated[float, Field(gt=0, le=1, strict=True, allow_inf_nan=False)] = Field(
        description="Payload share of what crosses the links (protocol overhead).")
    slice_bytes: Annotated[int, Field(ge=0, strict=True)] = Field(
        description="Bytes per pipeline slice; a step pays one slice more while the pipeline fills.")


class Topology(BaseModel):
    """Devices in groups; ``intra_group`` links inside a group, ``inter_group`` between."""

    model_config = _FROZEN
    groups: list[list[Index]] | None = Field(
        None, description="Device indices per group; omitted: one group of every device (full mesh).")
    intra_group: LinkModel | None = Field(None, description="Required when a group has two or more devices.")
    inter_group: LinkModel | None = Field(None, description="Required exactly when there are two or more groups.")


class SystemProfile(BaseModel):
    """A server of ``count`` identical devices, their links and their host links."""

    model_config = _FROZEN
    name: str = Field(min_length=1)
    description: str
    device: str | DeviceProfile = Field(description="A built-in device profile name, or a profile mapping.")
    count: Count = Field(description="Devices in the system, indexed 0..count-1.")
    topology: Topology
    host: HostLinkModel = Field(description="Each device's own host link.")
    network: NetworkModel | None = Field(None, description="The NIC to other servers, if any.")
    collectives: CollectiveModel | None = Field(None, description="The collective library's own costs; none: "
                                                                  "the links' alpha-beta cost alone.")
    sources: dict[str, str] = Field(description="Dotted numeric or peer_access field -> its source.")
    _group: dict[int, int] = PrivateAttr(default_factory=dict)  # device -> its group's index

    @field_validator("device", mode="before")
    @classmethod
    def _device(cls, value: Any) -> Any:
        if isinstance(value, str):
            known = builtin_profiles()
            if value.lower() not in known:
                raise ValueError(f"field 'device': unknown device {value!r}; known: {', '.join(known)}")
            return value.lower()
        if isinstance(value, dict):
            try:
                return DeviceProfile.model_validate(value)
            except ValidationError as exc:
                raise ValueError("; ".join(_in_device(e) for e in exc.errors())) from None
        if isinstance(value, DeviceProfile):
            return value
        raise ValueError(f"field 'device': expected a built-in device name or a profile mapping (got {value!r})")

    @model_validator(mode="before")
    @classmethod
    def _plausible(cls, data: Any) -> Any:
        check_ranges(data, SYSTEM)   # a count of 10^9 is refused before its groups are made
        return data

    @model_validator(mode="after")
    def _check(self) -> SystemProfile:
        groups = self.groups
        _check_groups(groups, self.count)
        topo = self.topology
        if topo.intra_group is None and any(len(g) > 1 for g in groups):
            raise ValueError("field 'topology.intra_group': required when a group has two or more devices")
        if (topo.inter_group is None) == (len(groups) > 1):
            need = "required" if topo.inter_group is None else "not allowed"
            raise ValueError(f"field 'topology.inter_group': {need} with {len(groups)} group(s)")
        sourced = set(_sourced_fields(self.model_dump(exclude={"sources", "device"})))
        if missing_src := sorted(sourced - self.sources.keys()):
            raise ValueError(f"field 'sources': no entry for {', '.join(missing_src)}")
        if unknown := sorted(self.sources.keys() - sourced):
            raise ValueError(f"field 'sources': entries for unknown fields {', '.join(unknown)}")
        if empty := sorted(k for k, v in self.sources.items() if not v.strip()):
            raise ValueError(f"field 'sources': empty entries for {', '.join(empty)}")
        return self

    @property
    def groups(self) -> list[list[int]]:
        """The device groups (one group of every device when the YAML gives none)."""
        return self.topology.groups or [list(range(self.count))]

    @property
    def device_profile(self) -> DeviceProfile:
        """The device profile every device of the system runs on."""
        return self.device if isinstance(self.device, DeviceProfile) else builtin_profiles()[self.device]

    def model_post_init(self, context: Any, /) -> None:
        self._group = {d: i for i, g in enumerate(self.groups) for d in g}

    def _check_index(self, device: int) -> None:
        if isinstance(device, bool) or not isinstance(device, int) or not 0 <= device < self.count:
            raise DeviceError(f"system '{self.name}': device {device!r} out of range "
                              f"(it has {self.count} devices, 0..{self.count - 1})")

    def _spec(self, a: int, b: int) -> tuple[LinkModel, int, int]:
        self._check_index(a)
        self._check_index(b)
        if a == b:
            raise DeviceError(f"system '{self.name}': device {a} has no link to itself")
        ga, gb = self._group[a], self._group[b]
        spec = self.topology.intra_group if ga == gb else self.topology.inter_group
        assert spec is not None  # the validator guarantees it
        return spec, ga, gb

    def link(self, a: int, b: int) -> LinkSpec:
        """The path a transfer from device ``a`` to device ``b`` takes."""
        spec, ga, gb = self._spec(a, b)
        kind = spec.kind.lower()
        if spec.shared == "switch":
            ports = (f"{kind}:out{a}", f"{kind}:in{b}")
            return LinkSpec(spec.kind, spec.bandwidth_gbps, spec.latency_us, ports[0], ports)
        ends = f"{a}->{b}" if spec.shared == "pair" else f"g{ga}" if ga == gb else f"g{ga}->g{gb}"
        return LinkSpec(spec.kind, spec.bandwidth_gbps, spec.latency_us, f"{kind}:{ends}")

    def host_link(self, device: int) -> LinkSpec:
        """Device ``device``'s h2d/d2h path (resource ``host:<device>``)."""
        self._check_index(device)
        return LinkSpec(self.host.kind, self.host.bandwidth_gbps, self.host.latency_us, f"host:{device}")

    def nic_link(self, device: int) -> LinkSpec | None:
        """Device ``device``'s NIC to other servers (resource ``nic:<device>``), if any."""
        self._check_index(device)
        n = self.network
        return None if n is None else LinkSpec(n.kind, n.bandwidth_gbps, n.latency_us, f"nic:{device}")

    def topo(self, a: int, b: int) -> int:
        """What ``aclrtGetDevicesTopo(a, b)`` reports (a ``DEVICES_TOPO_*`` value)."""
        return _TOPO[self._spec(a, b)[0].kind]

    def peer_capable(self, a: int, b: int) -> bool:
        """What ``aclrtDeviceCanAccessPeer(a, b)`` answers."""
        return self._spec(a, b)[0].peer_access

    def describe(self) -> str:
        """A few lines for humans: devices, groups, each link kind with its numbers."""
        t = self.topology
        lines = [f"{self.name}: {self.count} x {self.device_profile.name} — {self.description}"]
        if len(self.groups) > 1:
            lines.append("  groups: " + " ".join("[" + ",".join(map(str, g)) + "]" for g in self.groups))
        for where, spec in (("in a group" if len(self.groups) > 1 else "every pair", t.intra_group),
                            ("between groups", t.inter_group)):
            if spec is not None:
                share = {"pair": "per directed pair", "group": "shared per directed group pair",
                         "switch": "through a switch, one port per device each way"}[spec.shared]
                lines.append(f"  {where}: {spec.kind} {spec.bandwidth_gbps:g} GB/s, {spec.latency_us:g} us, "
                             f"{share}; peer access {'yes' if spec.peer_access else 'no'}")
        for where, path in (("host", self.host), ("network", self.network)):
            if path is not None:
                lines.append(f"  {where}: {path.kind} {path.bandwidth_gbps:g} GB/s, {path.latency_us:g} us, per device")
        return "\n".join(lines)


def _in_device(error: Any) -> str:
    """A device profile's error inside a system, its field named from the system's top."""
    text = describe({**error, "loc": ("device", *error["loc"])})
    return text.replace("field '", "field 'device.", 1) if error["type"] == "value_error" else text


def _check_groups(groups: list[list[int]], count: int) -> None:
    seen: set[int] = set()
    for group in groups:
        if not group:
            raise ValueError("field 'topology.groups': a group is empty")
        for d in group:
            if not 0 <= d < count:
                raise ValueError(f"field 'topology.groups': device {d} is out of range "
                                 f"for count {count} (0..{count - 1})")
            if d in seen:
                raise ValueError(f"field 'topology.groups': device {d} is listed twice")
            seen.add(d)
    if missing := sorted(set(range(count)) - seen):
        raise ValueError(f"field 'topology.groups': device {missing[0]} is in no group")


def _sourced_fields(data: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of every number and bool leaf of a dumped model (lists skipped)."""
    names: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict):
            names += _sourced_fields(value, f"{prefix}{key}.")
        elif isinstance(value, (int, float)):
            names.append(prefix + key)
    return names


FILES = DataFiles(SystemProfile, "system", "system profile", "system", "system_data")


@functools.cache
def _builtins() -> dict[str, SystemProfile]:
    return FILES.builtins()


def builtin_systems() -> list[str]:
    """The names of the shipped systems, sorted."""
    return list(_builtins())


def load_system(name_or_path: str | Path | SystemProfile) -> SystemProfile:
    """A system from a built-in name, a .yaml/.yml path, or a system (returned as is)."""
    return FILES.load(name_or_path, _builtins())


def system_json_schema() -> dict[str, Any]:
    """JSON Schema of a system file, for editors and ``schemas/system.schema.json``."""
    return SystemProfile.model_json_schema()
