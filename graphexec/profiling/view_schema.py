"""What ``graphexec view`` accepts of a timeline, as a schema checked at the boundary.

A timeline or PROF folder is untrusted input: the report reads numbers from it, draws
lanes from its pids and tids and prints its names, so every field the report reads is
checked here, once, before anything is drawn (pydantic; unknown fields are allowed, so a
newer graphexec's extra fields or another tool's pass through). Bad input is one line
naming the first field that is wrong, e.g. ``traceEvents[3].pid: Field required``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from graphexec.errors import GraphExecError

LIMIT = 1e15   # microseconds, counts and rates past this are no simulated run's (31 years in us)


def _finite(v: float) -> float:
    if not math.isfinite(v) or abs(v) > LIMIT:
        raise ValueError(f"must be a finite number of magnitude at most {LIMIT:g}")
    return v


Num = Annotated[float, Field(strict=False), AfterValidator(_finite)]
Int = Annotated[int, Field(ge=-(2**53), le=2**53)]
Id = Annotated[int, Field(ge=0, le=2**31)]
Tid = Union[Id, Annotated[str, Field(max_length=256)]]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=False)


class Complete(_Open):
    """A ``ph: X`` event: a kernel, copy, event record/wait or host launch."""
    name: str
    ts: Num
    dur: Annotated[float, AfterValidator(_finite), Field(ge=0)]
    pid: Id
    tid: Tid
    cat: str
    args: dict[str, Any] = {}

    @model_validator(mode="after")
    def _event_kind(self) -> "Complete":
        if self.cat == "event" and self.args.get("kind") not in ("record", "wait"):
            raise ValueError("an event's args.kind must be 'record' or 'wait'")
        return self


class Counter(_Open):
    """A ``ph: C`` event: every value a number (the charts draw them)."""
    name: str
    ts: Num
    pid: Id
    args: dict[str, Num] = {}


class Meta(_Open):
    """A ``ph: M`` event: process and thread names."""
    name: str
    pid: Id
    args: dict[str, Any] = {}

    @model_validator(mode="after")
    def _named(self) -> "Meta":
        if self.name in ("process_name", "thread_name") and not isinstance(self.args.get("name"), str):
            raise ValueError(f"a {self.name} event's args.name must be a string")
        return self


class Other(_Open):
    """Any other phase the report does not draw (flows, instants): a pid at least."""
    pid: Id


class Unit(_Open):
    name: str
    label: str


class Peak(_Open):
    units: dict[str, Unit] = {}   # the profile's names for the roles (cube, vector)
    ai_cores: Annotated[int, Field(ge=1, le=1 << 20)] = 1
    vector_cores: Annotated[int, Field(ge=1, le=1 << 20)] = 1
    coupled: bool = True
    hbm_bandwidth_gbps: Annotated[float, AfterValidator(_finite), Field(gt=0)] = 1.0
    queue_depth: Annotated[int, Field(ge=0, le=1 << 30)] | None = None


class Op(_Open):
    name: str
    op: str
    us: Num


class Cause(_Open):
    reason: str
    gain: Num
    message: str


class Action(_Open):
    name: str
    gain: Num
    makespan_us: Num
    flag: str
    option: str
    caveat: str | None


class Idle(_Open):
    idle_us: Num
    host_wait_us: Num
    kernel_wait_us: Num
    other_us: Num


class Queue(_Open):
    mean: Num
    max: Num
    blocked_us: Num
    full: bool


class Launch(_Open):
    kernels: Num
    short_kernels: Num
    short_kernel_us: Num
    median_kernel_us: Num
    mean_launch_delay_us: Num
    max_launch_delay_us: Num


class CriticalPath(_Open):
    tasks: list[Any] = []
    kernel_us: Num = 0.0
    sync_edges: Num = 0
    launch_us: Num = 0.0
    queue_blocks: Num = 0


StreamKey = Annotated[str, Field(pattern=r"^-?\d{1,10}$")]   # the report sorts streams by int(key)


class Analyses(_Open):
    idle: dict[StreamKey, Idle] = {}
    critical_path: CriticalPath = CriticalPath()
    launch: Launch | None = None
    queues: dict[StreamKey, Queue] = {}


class Diagnosis(_Open):
    reason: str
    message: str
    ops: list[Op] = []
    causes: list[Cause] = []
    actions: list[Action] | None = None
    analyses: Analyses = Analyses()


Stat = Union[Num, bool, str, None, dict[str, Any], list[Any]]
NUMBERS = ("makespan_us", "cube_utilization", "vector_utilization", "hbm_utilization", "mean_queue_depth",
           "max_queue_depth", "device_idle_us", "host_wait_us")


class Stats(_Open):
    """The stats the report shows are numbers; the rest may be anything JSON holds."""
    makespan_us: Num | None = None
    cube_utilization: Num | None = None
    vector_utilization: Num | None = None
    hbm_utilization: Num | None = None
    mean_queue_depth: Num | None = None
    max_queue_depth: Num | None = None
    device_idle_us: Num | None = None
    host_wait_us: Num | None = None


class RunStats(Stats):
    makespan_us: Num   # the runs table shows it


class Memory(_Open):
    """A run's memory summary (``memory_view.py``): the numbers the memory section prints."""
    reserved_bytes: Num
    peak_us: Num
    peak_bytes: Num
    live_count: Num = 0
    ops_allocating: Num = 0
    live: list[list[Any]] = []
    per_op: list[list[Any]] = []


class CardMemory(Memory):
    device: Id


class Run(_Open):
    run: Annotated[int, Field(ge=0, le=2**30)]
    group: Annotated[int, Field(ge=0, le=2**30)] | None = None
    model: str = ""
    stats: RunStats | None = None
    diagnosis: Diagnosis | None = None
    memory: Memory | None = None
    device_id: Id | None = None


class OtherData(_Open):
    model: str = ""
    device: str = "?"
    device_pid: Id | None = None
    peak: Peak = Peak()
    stats: Stats | None = None
    diagnosis: Diagnosis | None = None
    runs: list[Run] = []
    memory: Memory | None = None
    card_memory: list[CardMemory] = []


PHASES: dict[str, type[BaseModel]] = {"X": Complete, "C": Counter, "M": Meta}


def check(doc: dict[str, Any]) -> str:
    """Where ``doc`` (a parsed timeline) breaks the schema, as ``field: problem`` ("" if it holds)."""
    try:
        events = doc["traceEvents"]
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                return f"traceEvents[{i}]: not an object"
            try:
                PHASES.get(e.get("ph"), Other).model_validate(e)   # type: ignore[arg-type]
            except ValidationError as err:
                return _where(f"traceEvents[{i}]", err)
        if "otherData" in doc:
            OtherData.model_validate(doc["otherData"])
    except ValidationError as err:
        return _where("otherData", err)
    return ""


def _where(prefix: str, err: ValidationError) -> str:
    first = err.errors(include_url=False)[0]
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
    return f"{prefix}{path}: {first['msg']}"


def checked(doc: dict[str, Any], source: object) -> dict[str, Any]:
    """``doc`` itself when it holds to the schema; else a one-line error naming ``source``."""
    why = check(doc)
    if why:
        raise GraphExecError(f"{source}: not a graphexec timeline: {why}")
    return doc
