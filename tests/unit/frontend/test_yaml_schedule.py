"""The hand-written schedule check, a pure function: covered dependencies pass, each gap is reported."""

from __future__ import annotations

from graphexec.frontend.yaml_schedule import NodeRef, check_schedule

# a -> b -> c, and a -> d: a chain plus a branch
DEPS = [("a", "b", "va"), ("b", "c", "vb"), ("a", "d", "va")]


def nodes(**labels):
    return [NodeRef(n, labels.get(n), ("nodes", i)) for i, n in enumerate("abcd")]


def sched(*streams, sync=None):
    out = {"streams": [{"name": name, "priority": None, "tasks": [t if isinstance(t, dict) else {"run": t}
                                                                    for t in tasks]} for name, tasks in streams]}
    out["synchronize"] = sync if sync is not None else [s[0] for s in streams]
    return out


def check(schedule, **labels):
    return check_schedule(schedule, nodes(**labels), DEPS)


def test_one_stream_in_order_is_fine():
    assert check(sched(("s0", ["a", "b", "c", "d"]))) == []


def test_events_cover_cross_stream_dependencies():
    s = sched(("s0", ["a", {"record": "e1"}, "b", "c"]), ("s1", [{"wait": "e1"}, "d"]))
    assert check(s) == []


def test_a_chain_through_a_third_stream_covers_a_dependency():
    # a on s0 -> (e1) -> s2 records e2 after waiting e1 -> (e2) -> d on s1: covered transitively
    s = sched(("s0", ["a", {"record": "e1"}, "b", "c"]), ("s2", [{"wait": "e1"}, {"record": "e2"}]),
              ("s1", [{"wait": "e2"}, "d"]))
    assert check(s) == []


def test_missing_event_is_reported_not_added():
    s = sched(("s0", ["a", "b", "c"]), ("s1", ["d"]))
    assert check(s) == [(("schedule", "streams", 1, "tasks", 0),
                         "node 'd' on stream 's1' reads 'va' from node 'a' on stream 's0' with no event between "
                         "them: record an event on 's0' after 'a' and wait for it on 's1' before 'd'")]


def test_an_event_recorded_too_early_does_not_cover():
    s = sched(("s0", [{"record": "e1"}, "a", "b", "c"]), ("s1", [{"wait": "e1"}, "d"]))
    assert [m for _, m in check(s)] == ["node 'd' on stream 's1' reads 'va' from node 'a' on stream 's0' with no "
                                        "event between them: record an event on 's0' after 'a' and wait for it on "
                                        "'s1' before 'd'"]


def test_same_stream_out_of_order():
    assert check(sched(("s0", ["b", "a", "c", "d"]))) == [
        (("schedule", "streams", 0, "tasks", 0), "node 'b' runs before node 'a', which makes its input 'va', "
                                                 "on stream 's0'")]


def test_placement_problems():
    s = sched(("s0", ["a", "b", "a", "zz", "c"]), ("s0", []))
    assert check(s) == [
        (("schedule", "streams", 0, "tasks", 2), "node 'a' is scheduled twice (first on stream 's0')"),
        (("schedule", "streams", 0, "tasks", 3), "stream 's0' runs unknown node 'zz'"),
        (("schedule", "streams", 1, "name"), "stream 's0' is defined twice"),
        (("nodes", 3), "node 'd' is on no stream of the schedule"),
    ]


def test_event_problems_and_synchronize():
    s = sched(("s0", ["a", {"record": "e"}, "b", {"record": "e"}, "c"]), ("s1", [{"wait": "e"}, {"wait": "f"}, "d"]),
              sync=["s0", "s9"])
    assert check(s) == [
        (("schedule", "streams", 0, "tasks", 3), "event 'e' is recorded twice (first on stream 's0')"),
        (("schedule", "streams", 1, "tasks", 1), "stream 's1' waits for event 'f', which no stream records"),
        (("schedule", "synchronize", 1), "synchronize names unknown stream 's9'"),
    ]


def test_deadlock():
    s = sched(("s0", [{"wait": "e2"}, "a", {"record": "e1"}, "b", "c"]), ("s1", [{"wait": "e1"}, "d",
                                                                                 {"record": "e2"}]))
    assert check(s) == [(("schedule", "streams", 0, "tasks", 0),
                         "the schedule deadlocks: the waits for events 'e1', 'e2' form a cycle (each event is "
                         "recorded after a wait for another)")]


def test_stream_labels_must_share_a_stream():
    s = sched(("s0", ["a", {"record": "e"}, "b", "c"]), ("s1", [{"wait": "e"}, "d"]))
    assert check(s, a="pre", d="pre") == [
        (("schedule", "streams", 1, "tasks", 1), "nodes 'a' and 'd' share stream_label 'pre' but run on streams "
                                                 "'s0' and 's1'")]
    assert check(s, a="pre", b="pre", d="post") == []
