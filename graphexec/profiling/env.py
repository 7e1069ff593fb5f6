"""Profiling switched on from the environment, as msprof users do it:

    export ASCEND_PROFILING_ENABLED=1
    export ASCEND_PROFILING_OUTPUT_PATH=/tmp/profiling_output
    python run_model.py

Every run of the program is kept (each session run as its Result is made, the ACL devices
as they are reset and at exit) and one ``PROF_<YYYYMMDDhhmmss>_<pid>/`` folder in msprof's
layout (``msprof.py``) is written whole at exit. ``profile(dir)`` does the same for one
block of code. A folder that cannot be written costs one warning line on stderr; the
program's own results and exit status are untouched.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping

from graphexec._files import SignalStop, signals_unwind
from graphexec._render import term
from graphexec.profiling import record as rec
from graphexec.profiling.msprof import write_prof
from graphexec.profiling.record import DeviceRun

ENABLED = "ASCEND_PROFILING_ENABLED"
OUTPUT = "ASCEND_PROFILING_OUTPUT_PATH"
ON = ("1", "true", "on", "yes")


class Collector:
    """The runs seen since it was started: (record, stats) pairs, in the order they ran."""

    def __init__(self, root: str | os.PathLike[str], setting: str | None = None) -> None:
        self.root = Path(root).absolute()   # resolved now: the program may change folder before the write
        self.setting = setting or f"the profile folder {root}"   # what warnings name: what the program set
        self.runs: list[tuple[Any, Any]] = []
        self.seen: set[int] = set()     # ids of device simulators already kept
        self.path: Path | None = None   # the folder written, once stopped
        self.groups: dict[int, int] = {}   # run index -> its result's first run (the cards of one run)

    def on_result(self, result: Any) -> None:
        """A session run (one card, or card 0 of many and the other cards beside it)."""
        record = result.run
        if record is None:
            return
        stats = result.card_stats[0] if getattr(result, "card_stats", None) else result.stats
        first = len(self.runs)
        self.runs.append((record, stats))
        for i, card in sorted(getattr(result, "cards", {}).items()):
            if i != record.device_id:
                self.groups[len(self.runs)] = first
                self.runs.append((DeviceRun(list(card.sim.finished), list(card.launches), card.sim,
                                            record.profile, i, card.graph_mode, record.name), None))

    def on_device(self, device: Any, name: str = "acl") -> None:
        """What an ACL or eager device ran since its clock started (once per simulator)."""
        if id(device.sim) in self.seen or not device.sim.finished:
            return
        self.seen.add(id(device.sim))
        self.runs.append((DeviceRun.of(device, name), None))

    def extras(self) -> list[dict[str, Any]]:
        """Stats and diagnosis per run; a plan's diagnosis once, on its last run (its runs
        replay the same timeline); a planless run with stats (eager) its own."""
        from graphexec.profiling.diagnosis import diagnose

        last = {id(getattr(r, "plan", None)): k for k, (r, s) in enumerate(self.runs) if s is not None}
        out: list[dict[str, Any]] = []
        for k, (r, stats) in enumerate(self.runs):
            extra: dict[str, Any] = {"group": self.groups.get(k, k)}
            if stats is not None:
                extra["stats"] = stats.to_dict()
                plan = getattr(r, "plan", None)
                if plan is None or last.get(id(plan)) == k:   # an eager card's run: its own diagnosis
                    extra["diagnosis"] = diagnose(r, stats).to_dict()
                if plan is None:   # actions re-compile a plan: a planless run has none to measure
                    extra["diagnosis"].pop("actions")
            out.append(extra)
        return out

    def write(self) -> Path | None:
        """The PROF folder, or None (nothing ran, or one warning line when it cannot be written)."""
        if not self.runs:
            return None
        try:
            return write_prof(self.root, [r for r, _ in self.runs], self.extras(),
                              time.strftime("%Y%m%d%H%M%S"), os.getpid())
        except OSError as e:
            print(f"graphexec: warning: {term(self.setting)}: cannot write the profile: {term(e.strerror or e)}",
                  file=sys.stderr)
        except Exception as e:   # a bug here must not cost the program its results or exit status
            print(f"graphexec: warning: the profile for {term(self.setting)} was not written (internal error: "
                  f"{type(e).__name__}: {term(e)})", file=sys.stderr)
        return None


_active: list[Collector] = []
_watched: list[tuple[Any, str]] = []    # devices made outside ACL (eager mode's cards)


def watch(device: Any, name: str = "eager") -> None:
    """Keep what ``device`` runs for the profiles being collected (eager mode calls this for
    each card it opens; ACL devices are found through ``graphexec.acl``)."""
    if _active:
        _watched.append((device, name))


def _on_result(result: Any) -> None:
    for c in _active:
        c.on_result(result)


def _acl_devices() -> list[Any]:
    from graphexec.acl.state import STATE

    return [e.device for _, e in sorted(STATE.devices.items())]


def _on_teardown(device: Any) -> None:
    for c in _active:
        c.on_device(device)


def start(root: str | os.PathLike[str], setting: str | None = None) -> Collector:
    """Keep every run from now on, for ``stop`` to write (``setting``: what warnings call the folder)."""
    from graphexec.acl import state as acl_state

    c = Collector(root, setting)
    if not _active:
        rec.RESULT_OBSERVERS.append(_on_result)
        acl_state.TEARDOWN_HOOKS.append(_on_teardown)
    _active.append(c)
    return c


def stop(c: Collector) -> Path | None:
    """Stop keeping runs for ``c`` and write its folder."""
    from graphexec.acl import state as acl_state

    for dev in _acl_devices():
        c.on_device(dev)
    for dev, name in _watched:
        c.on_device(dev, name)
    _active.remove(c)
    if not _active:
        rec.RESULT_OBSERVERS.remove(_on_result)
        acl_state.TEARDOWN_HOOKS.remove(_on_teardown)
        _watched.clear()
    c.path = c.write()
    return c.path


@contextmanager
def profile(output_dir: str | os.PathLike[str]) -> Iterator[Collector]:
    """``with profile(dir):`` writes the block's runs as one PROF folder under ``dir``."""
    c = start(output_dir)
    try:
        yield c
    finally:
        stop(c)


def from_environment(environ: Mapping[str, str] = os.environ) -> Collector | None:
    """Switch profiling on for the whole program when ``ASCEND_PROFILING_ENABLED`` says so."""
    if environ.get(ENABLED, "").strip().lower() not in ON:
        return None
    given = environ.get(OUTPUT)
    c = start(given or os.getcwd(), f"{OUTPUT}={given}" if given else f"the working folder {os.getcwd()}")
    atexit.register(stop_at_exit, c)
    return c


def stop_at_exit(c: Collector) -> None:
    """``stop`` as the program ends. SIGTERM or SIGINT meanwhile leaves no folder, or a whole
    one (write_prof's temporary folder is removed), a line on stderr, and exit status
    128 + the signal, as a shell reports a process the signal ended: the default actions
    would leave the temporary folder (SIGTERM) or a traceback and exit 0 (SIGINT, raised
    inside an atexit callback)."""
    try:
        with signals_unwind():
            stop(c)
    except SignalStop as s:
        name = signal.Signals(s.signum).name
        print(f"graphexec: {name} while the profile for {term(c.setting)} was written; it was not written",
              file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + s.signum)
