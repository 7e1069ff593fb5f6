"""``_limits.collect_due``: the collection a paused stretch made due runs when a compile
ends, not at the start of the run after it, and the collector's settings stay as they
were. Collections are told apart by a marker the test sets around each step (setting it
allocates nothing, so the marker names the step whose allocation set the collection off)."""

from __future__ import annotations

import gc
from pathlib import Path

import onnx
import pytest

import graphexec as gx
from graphexec._limits import collect_due
from graphexec.engine.feeds import default_feeds

LIGHT = sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("*.onnx"))
STEP = ["-"]


@pytest.fixture
def collections():
    """(step, generation) of each collection while the test runs, the collector on."""
    seen: list[tuple[str, int]] = []

    def note(phase, info):
        if phase == "start":
            seen.append((STEP[0], info["generation"]))

    was, threshold = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.collect()
    gc.callbacks.append(note)
    yield seen
    gc.callbacks.remove(note)
    gc.set_threshold(*threshold)
    if not was:
        gc.disable()


def _young(n):
    """n tracked objects made with the collector off: its count passes the threshold unseen."""
    gc.disable()
    made = [[i] for i in range(n)]
    gc.enable()
    return made


def test_a_due_collection_runs_inside_and_settings_stay(collections):
    threshold = gc.get_threshold()
    keep = _young(threshold[0] + 50)
    STEP[0] = "collect_due"
    collect_due()
    STEP[0] = "-"
    assert [step for step, _ in collections] == ["collect_due"]
    assert gc.get_threshold() == threshold and gc.isenabled()
    del keep


def test_nothing_runs_when_nothing_is_due_or_the_collector_is_off(collections):
    keep = _young(10)
    STEP[0] = "collect_due"
    collect_due()
    keep += _young(gc.get_threshold()[0] + 50)
    gc.disable()
    collect_due()
    STEP[0] = "-"
    assert collections == [] and not gc.isenabled()
    gc.enable()


@pytest.mark.parametrize("path", LIGHT[:2], ids=[p.stem[6:] for p in LIGHT[:2]])
def test_a_compile_leaves_no_collection_to_the_first_run(path, collections):
    graph = gx.load(path)
    feeds = default_feeds(graph)
    session = gx.Session(graph, streams=4)
    STEP[0] = "compile"
    session.compile(feeds)
    STEP[0] = "simulate"
    session.simulate(feeds)
    STEP[0] = "-"
    assert any(step == "compile" for step, _ in collections), collections   # the compile walks its objects
    assert not any(step == "simulate" for step, _ in collections)


def test_many_young_objects_are_promoted_unwalked_and_cycles_still_collected(collections):
    """``promote_young``: past its bound, the young generations move to the oldest one with
    no collection (a 50,000-node compile's walk was 0.4-0.5 s); a cycle made meanwhile is
    collected by the next full collection; an application's frozen objects stay frozen."""
    import weakref

    from graphexec._limits import promote_young

    class Node:
        pass

    gc.disable()
    cycle = Node()
    cycle.me = cycle   # type: ignore[attr-defined]
    gone = weakref.ref(cycle)
    del cycle
    keep = [[i] for i in range(1000)]
    assert not promote_young(least=10**9)   # too few: left to the collection due
    assert promote_young(least=500) and gc.get_count()[0] == 0 and gc.get_freeze_count() == 0
    gc.enable()
    STEP[0] = "after"
    keep += [[i] for i in range(100)]
    STEP[0] = "-"
    assert collections == [] and gone() is not None   # promoted, not walked
    gc.collect()
    assert gone() is None
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert not promote_young(least=0) and gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    del keep
