"""The compiled plan as frozen values: tasks, schedule, memory plan, options."""

from graphexec.plan.clocks import Clocks
from graphexec.plan.memory import ALIGN, MemoryPlan, PlanEntry, align
from graphexec.plan.options import CompileOptions
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import AnyTask, EventTask, Runner, Task, TaskGraph, TaskKind, flatten_aliases

__all__ = ["ALIGN", "AnyTask", "Clocks", "CompileOptions", "EventTask", "MemoryPlan", "PlanEntry", "Runner",
           "Schedule", "Task", "TaskGraph", "TaskKind", "align", "flatten_aliases"]
