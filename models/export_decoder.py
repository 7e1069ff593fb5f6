"""Make models/gpt2_decoder.onnx: a 2-layer GPT-2 exported with its KV cache by torch.onnx.

Unlike ``make_decoder.py`` (a decoder written with onnx.helper), this one comes from a
real exporter: Hugging Face ``transformers``' ``GPT2LMHeadModel`` with a tiny config
(2 layers, 2 heads of 8, vocabulary 64), randomly initialised (seed 0), exported by
``torch.onnx.export`` with the inputs and outputs Optimum gives a decoder with past key
values: ``input_ids``, ``position_ids`` [1, T] and ``past_key_values.{i}.key|value``
[1, H, P, D] in; ``logits`` [1, T, V] and ``present.{i}.key|value`` [1, H, P + T, D]
out, with T and P dynamic (P = 0 is the prompt step).

torch and transformers are needed only to run this script, never by graphexec or its
tests (the .onnx file is committed beside it):

    python -m venv --system-site-packages /tmp/exporter
    /tmp/exporter/bin/pip install torch==2.13.0 transformers onnxscript
    /tmp/exporter/bin/python models/export_decoder.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
OUT = HERE / "gpt2_decoder.onnx"
LAYERS, HEADS, EMBED, VOCAB, POSITIONS = 2, 2, 16, 64, 128


def _model():   # type: ignore[no-untyped-def]
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=LAYERS, n_head=HEADS, n_embd=EMBED, vocab_size=VOCAB, n_positions=POSITIONS,
                        n_ctx=POSITIONS, attn_implementation="eager",
                        initializer_range=0.5)   # GPT-2's 0.02 makes near-uniform logits: every argmax alike
    return GPT2LMHeadModel(config).eval()


def _wrapped(model):   # type: ignore[no-untyped-def]
    """The model with its cache as flat tensors (Optimum's names), as ONNX needs them."""
    import torch
    from transformers import DynamicCache

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, position_ids, *past):   # type: ignore[no-untyped-def]
            cache = DynamicCache(config=model.config)
            for i in range(LAYERS):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.model(input_ids=input_ids, position_ids=position_ids, past_key_values=cache, use_cache=True)
            kv = out.past_key_values
            presents = [t for i in range(LAYERS) for t in (kv.layers[i].keys, kv.layers[i].values)]
            return (out.logits, *presents)

    return Decoder().eval()


def _names() -> tuple[list[str], list[str]]:
    cache = [f"{i}.{w}" for i in range(LAYERS) for w in ("key", "value")]
    return (["input_ids", "position_ids", *(f"past_key_values.{c}" for c in cache)],
            ["logits", *(f"present.{c}" for c in cache)])


def export(path: Path = OUT) -> Path:
    import torch

    decoder = _wrapped(_model())
    head = EMBED // HEADS
    past, new = 3, 2
    args = (torch.tensor([[5, 17]]), torch.arange(past, past + new)[None],
            *(torch.randn(1, HEADS, past, head) for _ in range(2 * LAYERS)))
    inputs, outputs = _names()
    seq, total = torch.export.Dim("sequence", max=POSITIONS), torch.export.Dim("past", max=POSITIONS)
    shapes = ({1: seq}, {1: seq}, tuple({2: total} for _ in range(2 * LAYERS)))   # the ``*past`` as one tuple
    program = torch.onnx.export(decoder, args, dynamo=True, input_names=inputs, output_names=outputs,
                                dynamic_shapes=shapes, optimize=True)
    program.save(str(path), external_data=False)
    _check(path, decoder, inputs)
    return path


def _check(path: Path, decoder, inputs: list[str]) -> None:   # type: ignore[no-untyped-def]
    """The exported file gives torch's numbers, on a prompt step (empty past) and a later one."""
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(str(path))
    head = EMBED // HEADS
    for past, ids in ((0, [5, 17, 42]), (4, [9])):
        args = (torch.tensor([ids]), torch.arange(past, past + len(ids))[None],
                *(torch.randn(1, HEADS, past, head) for _ in range(2 * LAYERS)))
        with torch.no_grad():
            want = [t.numpy() for t in decoder(*args)]
        got = session.run(None, {n: a.numpy() for n, a in zip(inputs, args)})
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    out = export(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
    print(f"wrote {out} ({out.stat().st_size} bytes)")
