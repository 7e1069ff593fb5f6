"""Every stream policy and memory mode on every light model: exact outputs, safe reuse."""

from __future__ import annotations

import glob
import os

import onnx
import pytest

import graphexec as gx
from memory_checks import check_no_live_overlap
from schedule_checks import check_events_minimal_and_sufficient, check_trace_order

LIGHT = sorted(glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light/*.onnx")))


@pytest.fixture(scope="module", params=LIGHT, ids=[os.path.basename(p)[6:-5] for p in LIGHT])
def model(request):
    graph = gx.load(request.param)
    feeds = gx.default_feeds(graph)
    return graph, feeds, gx.Session(graph).run(feeds).outputs


@pytest.mark.parametrize("streams,policy,memory", [(2, "ge", "reuse"), (4, "chains", "reuse"),
                                                  (4, "list", "joint"), (8, "ge", "reuse")])
def test_policy_matches_one_stream(model, streams, policy, memory):
    graph, feeds, expected = model
    session = gx.Session(graph, streams=streams, policy=policy, memory=memory)
    result = session.run(feeds)
    for k, v in expected.items():
        assert v.tobytes() == result.outputs[k].tobytes()
    check_trace_order(result.trace)
    check_events_minimal_and_sufficient(session.compiled.tasks, session.compiled.schedule)
    check_no_live_overlap(session, result)
