"""Replay steps: each kernel's start as one call, prepared with the plan.

A replayed run (``engine/replay.py``) starts and ends the kernels in the tape's order.
The plain start, ``KernelCall.compute``, gathers the inputs' views into a dict, looks up
the output's view and the runner, and the runner turns the dict back into arguments; on a
tiny tensor that costs several times the math. The pool does not move, so for a kernel
whose inputs are all planned views or constants the whole start is known at compile:
``partial(kernel, op_context, *views, out=view)``, with no Python frame of ours, or less
where the kernel binds its call to those arrays (``KernelDef.bind``: an elementwise kernel's
checks done once, its ufunc alone left). A kernel that computed into its output's view
(``direct``) has nothing left to store at its end.

The plain path stays the reference, and takes over a step wherever its assumptions end:
a kernel that raises (the runner says what that means: its fallback, or a KernelError),
a runner that turned to its fallback on another path (``NodeRunner.flips``), a run whose
views switched to a private cache (a run-time allocation) for every step not begun yet,
a kernel that returned something other than its output's view. A host-fused chain's
runner keeps its own call, on a dict of values built once (``_hold``); a graph-fused
node's members are called directly, their arguments bound once (``FusedRunner.bound``).
"""

from __future__ import annotations

from functools import partial
from itertools import repeat
from typing import Any, Callable

import numpy as np

from graphexec.engine import replay_code
from graphexec.engine.executor import ExecContext
from graphexec.engine.replay import Tape
from graphexec.errors import KernelError
from graphexec.kernels.dispatch import NodeRunner
from graphexec.kernels.fused import FusedRunner
from graphexec.passes.host_fusion import Done, FusedAffine, FusedConv
from graphexec.plan.tasks import Task

_NEVER = object()   # an ``outs`` entry no result is: the step's end always stores
_HELD = (FusedConv, FusedAffine, Done, FusedRunner)   # runners that read their values dict, never keep or change it


class Steps:
    """The kernels' starts, ends and direct outputs in launch order, for one plan.

    ``runners[i]`` is the NodeRunner whose kernel ``starts[i]`` calls directly (its
    arguments in ``args[i]``), None where the step is a runner's on a dict of values: held
    (``held[i]``, made once) or the plain ``KernelCall``'s.
    """

    def __init__(self, ctx: ExecContext, kernels: list[Task]) -> None:
        """``ctx``: a context of the plan (for its views and runners)."""
        self.kernels = kernels
        self.ctx: ExecContext = ctx   # the running replay's context, for the ends that store
        n = len(kernels)
        self.starts: list[Callable[[], Any]] = [_nothing] * n
        self.ends: list[Callable[[Any], None] | None] = [None] * n   # None: ``_store`` (a direct step's end)
        self.outs: list[Any] = [_NEVER] * n
        self.runners: list[NodeRunner | None] = [None] * n
        self.args: list[tuple[Any, ...]] = [()] * n
        self.into: list[Any] = [None] * n   # a direct step's one output's planned view, if it has one
        self.held = [False] * n   # the steps ``_hold`` made
        self.fused: list[FusedRunner | None] = [None] * n   # a held step's fused node (graph fusion), if it is one
        self.chains: set[int] = set()   # the held steps that are their members' binds (``_chain``)
        self.flips = NodeRunner.flips
        # every step is bound at the first replay: a plain step's KernelCall holds its run's context
        # (a plan that only ever runs timing-only should hold none), and a kernel's bind may read a
        # constant input's value, which a computing run has written into its device bytes by then
        self._plan = ctx
        self._unbound = list(range(n))
        # the tape's generated replay (``engine/replay_code.py``), for the steps of one version:
        # any step made plain since bumps it; and how often the loop replayed which tape and version
        self._version = 0
        self._program: tuple[Tape, int, replay_code.Program] | None = None
        self._seen: tuple[Tape | None, int, int] = (None, 0, 0)
        self._any = (-1, False)   # ``binds_any`` for a version
        self._outer_run: Any = None   # the Loop or Scan run whose outer-scope values the steps bound (``bind_outer``)
        self._reading: list[int] | None = None   # the steps that read an outer-scope value

    def _direct(self, i: int, task: Task, ctx: ExecContext) -> bool:
        """Make step ``i`` a direct call of its kernel, where its runner and values allow."""
        runner = ctx.runners.get(task.id)
        if type(runner) is not NodeRunner or runner.fn is None or runner.uses_fallback:
            return False
        views, reads = ctx.views, task.reads
        args: list[Any] = []
        for name in runner.node.inputs:
            if not name:
                args.append(None)
                continue
            v = views.get(name)
            if v is None:
                if name not in reads:
                    return False
                try:
                    v = ctx._read(name)
                except KernelError:   # a host value, or one a run allocates: read when it runs
                    return False
            args.append(v)
        written = ctx.direct_out(task)
        takes = runner.takes_out or getattr(runner.bind, "takes_out", False)   # a bind may take what its kernel won't
        out = ctx.read(written) if takes and written is not None else None
        kw = {} if out is None else {"out": out}
        bound = None if runner.bind is None else runner.bind(runner.ctx, *args, **kw)
        if bound is None and not runner.takes_out:
            out, kw = None, {}
        self.starts[i] = bound or partial(runner.fn, runner.ctx, *args, **kw)
        self.outs[i] = _NEVER if out is None else out
        self.runners[i], self.args[i] = runner, tuple(args)
        self.into[i] = into = out if out is not None or runner.single is None else views.get(runner.single)
        if bound is not None and isinstance(getattr(bound, "__self__", None), repeat):
            res = bound()   # a view bind's views, made at bind time: the same arrays every run, no math to do
            if into is not None and type(res) is np.ndarray and res.shape == into.shape and res.dtype == into.dtype:
                self.ends[i] = partial(into.__setitem__, Ellipsis)   # ``_store``'s copy, checked once
            elif into is None and type(res) is tuple:   # a Split's: each view into its output's, checked once
                pairs = _copies(runner.node.outputs, res, views)
                if pairs:
                    self.ends[i] = partial(_copy_each, pairs)
        return True

    def _hold(self, i: int, ctx: ExecContext) -> bool:
        """Make step ``i`` a host-fused chain's runner called on its values as they stand: the
        dict ``KernelCall.compute`` would build every run, built once (those runners only
        read it); its end is the plain store."""
        task = self.kernels[i]
        runner = ctx.runners.get(task.id)
        views, outer = ctx.views, self._plan.outer   # a body's outer-scope values, bound for a run (``bind_outer``)
        if runner is None or type(runner) not in _HELD or any(n not in views and n not in outer for n in task.reads):
            return False
        call = ctx.call(task)
        out = None if call.out is None else views.get(call.out)
        values = {n: views[n] if n in views else outer[n] for n in task.reads}
        if type(runner) is FusedRunner and self._chain(i, runner, values, out, call):
            return True
        if type(runner) is FusedRunner:   # its members' kernels called directly, where they all have one
            start = runner.bound(values, out)
            if start is None:
                return False
            self.fused[i] = runner
        else:
            start = partial(runner, values, out)
        self.starts[i], self.ends[i], self.outs[i] = start, call.store, _NEVER
        self.held[i] = True
        return True

    def _chain(self, i: int, runner: FusedRunner, values: dict[str, Any], out: Any, call: Any) -> bool:
        """Make step ``i`` a graph-fused node's members as a chain of their binds
        (``FusedRunner.chained``): its start returns the last member's result, which its end
        stores unless it is ``out`` already."""
        chain = runner.chained(values, out)
        if chain is None:
            return False
        start, into = chain
        self.starts[i], self.ends[i] = start, partial(_store_one, call.store, runner.outputs[0])
        self.outs[i] = out if into else _NEVER
        self.held[i], self.fused[i] = True, runner
        self.chains.add(i)
        return True

    def plain(self, i: int) -> None:
        """Step ``i`` as ``KernelCall.compute`` and ``store``: the plan's KernelCall (the context's
        ``calls`` are the plan's, which every run rebinds)."""
        call = self.ctx.call(self.kernels[i])
        self._version += 1   # a program made before runs the step as it was
        self.starts[i], self.ends[i], self.outs[i] = call.compute, call.store, _NEVER
        self.runners[i], self.held[i], self.fused[i] = None, False, None
        self.chains.discard(i)

    def _store(self, i: int, res: Any) -> None:
        """The end of a direct step whose kernel did not return its output's view: an array
        that fits the one output's planned view is copied in (``ExecContext.write``'s case
        for it), anything else goes through the plain store."""
        view = self.into[i]
        if type(res) is np.ndarray and view is not None and res.shape == view.shape and res.dtype == view.dtype:
            view[...] = res
            return
        runner = self.runners[i]
        assert runner is not None   # only direct steps end here
        self.ctx.call(self.kernels[i]).store(runner.outputs(res))

    def failed(self, i: int, exc: Exception) -> Any:
        """Step ``i``'s kernel raised ``exc``: what its runner makes of it. Bad values are its
        KernelError, and the step stays direct for the next run's values; a case the kernel
        does not serve is the fallback's outputs, and the step is plain from now on."""
        runner = self.runners[i]
        if runner is None:
            if i not in self.chains:
                raise exc
            self.plain(i)   # a member's bind raised: the members as their runners call them say what it means
            return self.ctx.call(self.kernels[i]).compute()
        args = list(self.args[i])
        outputs = runner.recover(exc, {n: v for n, v in zip(runner.node.inputs, args) if n}, args)
        self.plain(i)
        return outputs

    def _refresh(self) -> None:
        """Bind the steps not bound yet (held, or plain on ``self.ctx``'s calls), and make plain
        the steps whose runner turned to its fallback since the last run."""
        for i in self._unbound:
            if not self._direct(i, self.kernels[i], self._plan) and not self._hold(i, self.ctx):
                self.plain(i)
        if self._unbound:
            self._version += 1
        self._unbound = []
        if self.flips != NodeRunner.flips:   # a runner turned to its fallback since
            self.flips = NodeRunner.flips
            for i, runner in enumerate(self.runners):
                fused = self.fused[i]
                if (runner is not None and runner.uses_fallback) or (fused is not None and fused.uses_fallback):
                    self.plain(i)

    def replay(self, ctx: ExecContext, tape: Tape) -> None:
        """Run the kernels' starts and ends in the order of the tape's steps: through the
        tape's generated program where it has one (``engine/replay_code.py``), the loop
        (``_walk``) from wherever the program hands back, or from the first step."""
        self.ctx = ctx
        self._refresh()
        results: list[Any] = [None] * len(self.starts)
        program, k = self._program_for(tape), 0
        if program is not None:
            views = ctx.views
            for fn in program:
                k, exc = fn(ctx, views, results)
                if k >= 0:
                    break
            else:
                return
            s = tape.steps[k]
            if exc is not None:   # the start at k raised
                results[s] = self.failed(s, exc)
            else:   # the end at k moved the views (a run-time allocation)
                self._plain_after(tape, k)
            k += 1
        self._walk(ctx, tape, k, results)

    def _program_for(self, tape: Tape) -> replay_code.Program | None:
        """The tape's program for the steps as they stand, made once the loop has replayed
        this tape ``AFTER_REPLAYS`` times with no step changed; else None."""
        version, made = self._version, self._program
        if made is not None and made[0] is tape and made[1] == version:
            return made[2]
        last, at, seen = self._seen
        seen = seen + 1 if last is tape and at == version else 1
        self._seen = (tape, version, seen)
        if seen <= replay_code.AFTER_REPLAYS:
            return None
        ends = [e if e is not None else partial(self._store, i) for i, e in enumerate(self.ends)]
        program = replay_code.generate(tape.steps, self.starts, ends, self.outs, _NEVER)
        self._program = (tape, version, program)
        return program

    def _walk(self, ctx: ExecContext, tape: Tape, first: int, results: list[Any]) -> None:
        """The tape's steps from position ``first`` on, in a loop: the plain reference of the
        generated programs, and what runs where they hand back."""
        starts, ends, outs = self.starts, self.ends, self.outs
        views = ctx.views
        for k, s in enumerate(tape.steps[first:] if first else tape.steps, first):
            if s >= 0:
                try:
                    results[s] = starts[s]()
                except Exception as e:  # noqa: BLE001  (``failed`` re-raises what the runner does not handle)
                    results[s] = self.failed(s, e)
                continue
            res = results[~s]
            results[~s] = None
            if res is not outs[~s]:
                end = ends[~s]
                if end is None:
                    self._store(~s, res)
                else:
                    end(res)
                if ctx.views is not views:   # a run-time allocation: later reads look again
                    views = ctx.views
                    self._plain_after(tape, k)

    def bind_outer(self, outer: dict[str, Any], run: Any) -> None:
        """A control-flow body's outer-scope values (the weights a body reads from the graph
        around it), constant over one Loop or Scan run ``run``: the steps that read them are
        bound again on them, once per run, so their kernels start directly (without them those
        steps could only be plain). Every run binds anew: the next one's values may differ."""
        if run is self._outer_run:
            return
        if self._reading is None:
            self._reading = [i for i, t in enumerate(self.kernels) if any(n in outer for n in t.reads)]
        self._outer_run = run
        self._plan.outer = outer   # ``_direct`` reads them through the plan's context (``ExecContext._read``)
        if self._reading:
            self._unbound = sorted({*self._unbound, *self._reading})

    def binds_any(self) -> bool:
        """Whether any step starts other than through its KernelCall (direct, held or chained):
        where none does, ``inline``'s starts would only wrap the plain path."""
        self._refresh()
        if self._any[0] != self._version:
            self._any = (self._version, any(r is not None for r in self.runners) or any(self.held))
        return self._any[1]

    def inline(self, ctx: ExecContext, alone: bool = False) -> tuple[list[Callable[[], Any]], Callable[[Any], None]]:
        """Each kernel's start and the one end, for a run that computes during its simulation
        in ``ctx``, a context of this plan of its own (a multi-card run's, ``cluster/cards.py``,
        where micro-batches of one plan are in flight at once): a direct step is its kernel
        called directly; a held step its runner on the values held; any other step, or any
        once ``ctx`` has views of its own (a run-time allocation), ``ctx``'s own KernelCall,
        the plain path. Every end but a direct one's is ``ctx``'s plain store. A start
        returns what its end takes: ``(i, result, runner)``, the runner where the step was direct.
        ``alone``: no two runs of the plan are ever in flight at once (a control-flow body's
        iterations), so a chain runs on its scratch arrays too."""
        self._refresh()
        kernels, starts, views = self.kernels, self.starts, self.ctx.views

        def start(i: int) -> tuple[int, Any, NodeRunner | None]:
            if ctx.views is views:
                runner = self.runners[i]
                if runner is not None:
                    try:
                        return i, starts[i](), runner
                    except Exception as e:  # noqa: BLE001  (``failed`` re-raises what the runner does not handle)
                        return i, self.failed(i, e), None
                if self.held[i] and i not in self.chains:   # a chain's scratch arrays are this plan's run's
                    return i, starts[i](), None
                fused = self.fused[i]
                if alone and i in self.chains and fused is not None:
                    try:
                        return i, {fused.outputs[0]: starts[i]()}, None
                    except Exception:  # noqa: BLE001  (its members as their runners call them say what it means)
                        self.plain(i)
            return i, ctx.call(kernels[i]).begin(), None

        def end(token: tuple[int, Any, NodeRunner | None]) -> None:
            i, res, runner = token
            if runner is not None:   # a direct step: ``_store``, on ``ctx``
                if res is self.outs[i]:
                    return
                view = self.into[i]
                if type(res) is np.ndarray and view is not None and res.shape == view.shape \
                        and res.dtype == view.dtype:
                    view[...] = res
                    return
                res = runner.outputs(res)
            ctx.call(kernels[i]).finish(res)

        return [partial(start, i) for i in range(len(kernels))], end

    def _plain_after(self, tape: Tape, k: int) -> None:
        """Every direct step that begins after the tape's step ``k`` goes plain: its views
        were taken from the plan's cache, which this run no longer uses."""
        starts = tape.starts
        for i, runner in enumerate(self.runners):
            if (runner is not None or self.held[i]) and starts[i] > k:
                self.plain(i)


def _copies(names: list[str], res: tuple[Any, ...], views: dict[str, Any]) -> tuple[tuple[Any, Any], ...]:
    """(output's planned view, view bind's array) for each named output of a multi-output view
    bind (``Steps._direct``), where each fits its view exactly; empty otherwise (the plain store)."""
    pairs = []
    if len(res) != len(names):
        return ()
    for name, value in zip(names, res):
        if not name:
            continue
        dst = views.get(name)
        if dst is None or type(value) is not np.ndarray or value.shape != dst.shape or value.dtype != dst.dtype:
            return ()
        pairs.append((dst, value))
    return tuple(pairs)


def _copy_each(pairs: tuple[tuple[np.ndarray, np.ndarray], ...], res: Any) -> None:
    """A multi-output view bind's end: ``_store``'s copies, their checks made once (``_copies``)."""
    for dst, src in pairs:
        dst[...] = src


def _store_one(store: Callable[[dict[str, Any]], None], name: str, res: Any) -> None:
    """A chain's end (``Steps._chain``): its one output through the plain store."""
    store({name: res})


def _nothing() -> None:
    """A placeholder start, replaced in ``Steps.__init__``."""
