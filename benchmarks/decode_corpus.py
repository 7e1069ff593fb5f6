"""A corpus of LLM decode steps with past key values, written by a real exporter, for decode_speed.py.

Usage: /path/to/torch-venv/bin/python benchmarks/decode_corpus.py [--out DIR] [--only NAME,...]

Hugging Face ``transformers``' GPT-2, Llama and Qwen2 causal LMs with small configs (4 layers,
hidden 64, vocabulary 256; Llama and Qwen2 with grouped-query attention, 4 query heads over 2
key/value heads), randomly initialised (seed 0), exported by ``torch.onnx.export`` (dynamo) with
the inputs and outputs Optimum gives a decoder with past key values: ``input_ids`` and
``position_ids`` [1, T], ``past_key_values.{i}.key|value`` [1, H, P, D] in; ``logits`` and
``present.{i}.key|value`` out, T and P dynamic. Written to ``~/.cache/graphexec/decode`` (or
DIR), never into the repository; each file is checked against torch through onnxruntime.

torch and transformers are tools of the benchmark, not dependencies of graphexec:
``pip install torch transformers onnxscript`` in a separate environment.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import numpy as np

CACHE = Path(os.environ.get("GRAPHEXEC_DECODE_CACHE", Path.home() / ".cache" / "graphexec" / "decode"))
LAYERS, HIDDEN, HEADS, KV_HEADS, VOCAB, POSITIONS = 4, 64, 4, 2, 256, 256


def _config(family: str) -> Any:
    import transformers as tf

    common = dict(vocab_size=VOCAB, num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
                  intermediate_size=2 * HIDDEN, max_position_embeddings=POSITIONS, attn_implementation="eager",
                  initializer_range=0.5)
    if family == "gpt2":
        return tf.GPT2Config(n_layer=LAYERS, n_head=HEADS, n_embd=HIDDEN, vocab_size=VOCAB, n_positions=POSITIONS,
                             attn_implementation="eager", initializer_range=0.5)
    if family == "llama":
        return tf.LlamaConfig(num_key_value_heads=KV_HEADS, **common)
    if family == "qwen2":
        return tf.Qwen2Config(num_key_value_heads=KV_HEADS, **common)
    raise SystemExit(f"unknown family {family!r}")


MODELS = {"gpt2_decode": "gpt2", "llama_decode": "llama", "qwen2_decode": "qwen2"}


def _wrapped(model: Any) -> Any:
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
            return (out.logits, *[t for i in range(LAYERS) for t in (kv.layers[i].keys, kv.layers[i].values)])

    return Decoder().eval()


def _names() -> tuple[list[str], list[str]]:
    cache = [f"{i}.{w}" for i in range(LAYERS) for w in ("key", "value")]
    return (["input_ids", "position_ids", *(f"past_key_values.{c}" for c in cache)],
            ["logits", *(f"present.{c}" for c in cache)])


def _kv(family: str) -> tuple[int, int]:
    """(key/value heads, head size)."""
    return (HEADS if family == "gpt2" else KV_HEADS), HIDDEN // HEADS


def _args(family: str, past: int, ids: list[int]) -> tuple[Any, ...]:
    import torch

    heads, head = _kv(family)
    return (torch.tensor([ids]), torch.arange(past, past + len(ids))[None],
            *(torch.randn(1, heads, past, head) for _ in range(2 * LAYERS)))


def export(name: str, out: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM

    family = MODELS[name]
    torch.manual_seed(0)
    decoder = _wrapped(AutoModelForCausalLM.from_config(_config(family)).eval())
    inputs, outputs = _names()
    seq, total = torch.export.Dim("sequence", max=POSITIONS), torch.export.Dim("past", max=POSITIONS)
    shapes = ({1: seq}, {1: seq}, tuple({2: total} for _ in range(2 * LAYERS)))
    program = torch.onnx.export(decoder, _args(family, 3, [5, 17]), dynamo=True, input_names=inputs,
                                output_names=outputs, dynamic_shapes=shapes, optimize=True)
    path = out / f"{name}.onnx"
    program.save(str(path), external_data=False)
    _check(path, decoder, family, inputs)
    return path


def _check(path: Path, decoder: Any, family: str, inputs: list[str]) -> None:
    """The exported file gives torch's numbers, on a prompt step (empty past) and a later one."""
    import onnxruntime as ort
    import torch

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for past, ids in ((0, [5, 17, 42]), (16, [9])):
        args = _args(family, past, ids)
        with torch.no_grad():
            want = [t.numpy() for t in decoder(*args)]
        got = session.run(None, {n: a.numpy() for n, a in zip(inputs, args)})
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=CACHE)
    ap.add_argument("--only", metavar="NAME,...")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in MODELS:
        if args.only and not any(k in name for k in args.only.split(",")):
            continue
        path = export(name, args.out)
        print(f"wrote {path} ({path.stat().st_size} bytes)", flush=True)


if __name__ == "__main__":
    main()
