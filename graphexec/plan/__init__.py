"""The compiled plan as frozen values: the Plan itself, its tasks, schedule, memory plan, bounds, options."""

from graphexec.plan.clocks import Clocks
from graphexec.plan.compiled import BodyPlan, Bounds, Plan, ThreadPlan
from graphexec.plan.measured import MeasuredOp, MeasuredTimes
from graphexec.plan.memory import ALIGN, MemoryPlan, PlanEntry, align
from graphexec.plan.options import CompileOptions
from graphexec.plan.schedule import Schedule
from graphexec.plan.tasks import AnyTask, EventTask, Runner, Task, TaskGraph, TaskKind, flatten_aliases

__all__ = ["ALIGN", "AnyTask", "BodyPlan", "Bounds", "Clocks", "CompileOptions", "EventTask", "MeasuredOp",
           "MeasuredTimes", "MemoryPlan", "Plan", "PlanEntry", "Runner", "Schedule", "Task", "TaskGraph", "TaskKind",
           "ThreadPlan", "align", "flatten_aliases"]
