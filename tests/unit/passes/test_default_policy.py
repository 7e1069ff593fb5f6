"""The default stream policy at N streams is never worse than GE's rule or the chain cover:
it takes the fastest of them by a timing-only simulation, as ``auto`` does at that limit."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

import graphexec as gx

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("device", ["ascend910", "ascend310p"])
@pytest.mark.parametrize("model", [LIGHT / "light_inception_v1.onnx", ROOT / "models" / "inception_block.onnx"])
@pytest.mark.parametrize("streams", [2, 4])
def test_default_is_never_worse_than_ge_or_chains(device, model, streams):
    graph = gx.load(model)

    def span(policy: str | None) -> float:
        return gx.Session(graph, streams=streams, policy=policy, device=device).simulate().stats.makespan_us

    default = gx.Session(graph, streams=streams, device=device)
    assert default.compiled.schedule.policy in ("ge", "chains", "list")
    best = default.simulate().stats.makespan_us
    assert best <= min(span("ge"), span("chains"), span("list")) * (1 + 1e-9)


def test_one_stream_stays_single():
    graph = gx.load(ROOT / "models" / "inception_block.onnx")
    assert gx.Session(graph, streams=1).compiled.schedule.policy == "single"
