"""A decode loop with the KV cache on the device: a prompt step, then one token per step.

The model is a decoder exported with its cache (Hugging Face Optimum's names): inputs
``input_ids`` (and ``position_ids``, ``attention_mask`` when it has them) and
``past_key_values.{i}.key|value``; outputs ``logits`` and ``present.{i}.key|value``. Each
step runs the session with the previous step's presents as its pasts: they are kept on
the device (``Session.run(keep=...)``) and fed back as ``DeviceTensor``\\ s, so the cache
never crosses to the host; only the new token goes in and the logits come out. Tokens are
picked greedily (argmax of the last position's logits).

Every step is one run: under profiling each is a step on one timeline
(``profiling/steps.py``). The session's device keeps its clock running from step to step
(``Device.clock_us``): ``Decoded.starts_us`` places each step on it, and ``gaps_us`` is
the device's idle time between steps while the host copied the logits out, synchronized,
and fed and launched the next step. ``Session(launch="graph")`` loads each step's task list with
its plan, as a captured graph (NPUGraph, aclgraph) replays it; ``launch="host"`` launches
every task from the host, as eager decoding does: the difference is the launch cost that
capture removes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from graphexec.engine.device_tensor import DeviceTensor
from graphexec.engine.result import Result
from graphexec.errors import FeedError, GraphExecError
from graphexec.ir import Graph

if TYPE_CHECKING:
    from graphexec.api.session import Session

PAST, PRESENT = "past_key_values.", "present."


@dataclass
class Decoded:
    """The tokens a decode loop made and each step's result (the prompt step first)."""

    prompt: list[int]
    tokens: list[int] = field(default_factory=list)
    steps: list[Result] = field(default_factory=list)

    @property
    def step_us(self) -> list[float]:
        """Each step's simulated device time (us), the prompt step first."""
        return [r.stats.makespan_us for r in self.steps]

    @property
    def starts_us(self) -> list[float]:
        """Each step's start on the device's running clock (us), the first step's at 0."""
        at = [_clock(r)[1] for r in self.steps]
        return [t - at[0] for t in at]

    @property
    def gaps_us(self) -> list[float]:
        """The device's idle time (us) between each step's last task and the next one's first."""
        spans = [_device_span(r) for r in self.steps]
        return [(b_at + b[0]) - (a_at + a[1])
                for a_at, a, b_at, b in zip(self.starts_us, spans, self.starts_us[1:], spans[1:])]

    def to_dict(self) -> dict[str, Any]:
        decode = self.step_us[1:]
        return {"prompt": self.prompt, "tokens": self.tokens, "step_us": self.step_us,
                "prompt_us": self.step_us[0] if self.steps else None,
                "per_token_us": float(np.mean(decode)) if decode else None,
                "starts_us": self.starts_us, "gaps_us": self.gaps_us}


def _clock(result: Result) -> tuple[int, float, float]:
    clock = result.run.clock if result.run is not None else None
    if clock is None:
        raise GraphExecError("a decode step's result keeps no record of its run")
    return clock


def _device_span(result: Result) -> tuple[float, float]:
    """The first start and the last end of the step's device tasks, on its own clock."""
    assert result.run is not None   # ``_clock`` checked it
    done = [t for t in result.run.tasks if t.end_t is not None]
    return min(t.start_t for t in done), max(t.end_t for t in done)


def cache_pairs(graph: Graph) -> dict[str, str]:
    """Each past input and the present output that feeds it at the next step."""
    pairs = {name: PRESENT + name.removeprefix(PAST) for name in graph.inputs if name.startswith(PAST)}
    missing = [p for p in pairs.values() if p not in graph.outputs]
    if not pairs or missing:
        why = f"output {missing[0]!r} is missing" if missing else f"no input is named {PAST}<layer>.key|value"
        raise GraphExecError(f"{graph.name or 'the model'} is not a decoder with its KV cache: {why}")
    if "input_ids" not in graph.inputs:
        raise GraphExecError("a decoder takes its tokens as input 'input_ids'")
    return pairs


def _empty_past(graph: Graph, name: str) -> np.ndarray:
    """The prompt step's past: sequence axis (-2) empty, any other symbolic dim 1."""
    t = graph.values[name].type
    if t.shape is None or len(t.shape) < 2 or t.dtype is None:
        raise FeedError(f"input {name!r}: a past key/value needs a declared dtype and rank >= 2")
    shape = [1 if not isinstance(d, int) else d for d in t.shape]
    shape[-2] = 0
    return np.zeros(shape, t.dtype)


def _feeds(graph: Graph, ids: list[int], start: int, cache: dict[str, Any]) -> dict[str, Any]:
    n = len(ids)
    feeds: dict[str, Any] = {"input_ids": np.array([ids], np.int64), **cache}
    if "position_ids" in graph.inputs:
        feeds["position_ids"] = np.arange(start, start + n, dtype=np.int64)[None]
    if "attention_mask" in graph.inputs:
        feeds["attention_mask"] = np.ones((1, start + n), np.int64)
    return feeds


def decode(session: "Session", prompt: Sequence[int], steps: int) -> Decoded:
    """The prompt step, then ``steps`` decode steps, the cache kept on the device."""
    if not prompt or isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise GraphExecError("decode takes a non-empty prompt and steps >= 0")
    graph = session.graph
    pairs = cache_pairs(graph)
    logits = "logits" if "logits" in graph.outputs else graph.outputs[0]
    out = Decoded([int(t) for t in prompt])
    cache: dict[str, Any] = {p: _empty_past(graph, p) for p in pairs}
    ids, start = list(out.prompt), 0
    try:
        for _ in range(steps + 1):
            result = session.run(_feeds(graph, ids, start, cache), keep=pairs.values())
            _free(cache)
            cache = {p: result.outputs[q] for p, q in pairs.items()}
            token = int(np.argmax(result.outputs[logits][0, -1]))
            out.tokens.append(token)
            out.steps.append(result)
            start += len(ids)
            ids = [token]
    finally:
        _free(cache)
    return out


def _free(cache: dict[str, Any]) -> None:
    for value in cache.values():
        if isinstance(value, DeviceTensor):
            value.free()
