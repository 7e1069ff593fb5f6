"""Make models/tiny_decoder.onnx: a 2-layer GPT-2-style decoder with past key values.

The graph is what Hugging Face Optimum exports for a decoder with its KV cache (names
included): inputs ``input_ids`` and ``position_ids`` [1, T] and, per layer,
``past_key_values.{i}.key`` / ``.value`` [1, H, P, D]; outputs ``logits`` [1, T, V] and
``present.{i}.key`` / ``.value`` [1, H, P + T, D]. Each layer: pre-LayerNorm, attention
over the past and the new keys (concatenated on the sequence axis) with a causal mask
offset by P (Trilu), residual, pre-LayerNorm MLP (Gelu, tanh form), residual. Weights
are random (seed 0), as a randomly initialised network's; no tokenizer is involved.

The graph is written with onnx.helper (``export_decoder.py`` makes the same architecture
with a real exporter, torch.onnx from transformers' GPT-2: ``gpt2_decoder.onnx``).

Run ``python models/make_decoder.py``; the .onnx file is committed beside it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).parent
LAYERS, HEADS, HEAD_DIM, VOCAB, MAX_POS = 2, 2, 8, 64, 128
EMBED = HEADS * HEAD_DIM


class _Builder:
    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def weight(self, name: str, shape: tuple[int, ...], scale: float = 0.2) -> str:
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def op(self, op: str, inputs: list[str], out: str, **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out


def _layer_norm(b: _Builder, x: str, name: str) -> str:
    g = b.const(f"{name}.g", np.ones(EMBED, np.float32))
    beta = b.const(f"{name}.b", np.zeros(EMBED, np.float32))
    return b.op("LayerNormalization", [x, g, beta], f"{name}.out", axis=-1, epsilon=1e-5)


def _heads(b: _Builder, x: str, name: str) -> str:
    """[1, T, E] -> [1, H, T, D]."""
    shape = b.const(f"{name}.shape", np.array([1, -1, HEADS, HEAD_DIM], np.int64))
    return b.op("Transpose", [b.op("Reshape", [x, shape], f"{name}.split")], f"{name}.heads", perm=[0, 2, 1, 3])


def _linear(b: _Builder, x: str, name: str, n_in: int, n_out: int) -> str:
    y = b.op("MatMul", [x, b.weight(f"{name}.w", (n_in, n_out))], f"{name}.mm")
    return b.op("Add", [y, b.weight(f"{name}.bias", (n_out,), 0.02)], f"{name}.out")


def _attention(b: _Builder, x: str, i: int) -> str:
    q, k, v = (_heads(b, _linear(b, x, f"l{i}.{n}", EMBED, EMBED), f"l{i}.{n}") for n in "qkv")
    keys = b.op("Concat", [f"past_key_values.{i}.key", k], f"present.{i}.key", axis=2)
    values = b.op("Concat", [f"past_key_values.{i}.value", v], f"present.{i}.value", axis=2)
    kt = b.op("Transpose", [keys], f"l{i}.kt", perm=[0, 1, 3, 2])
    scale = b.const(f"l{i}.scale", np.array(1.0 / np.sqrt(HEAD_DIM), np.float32))
    scores = b.op("Mul", [b.op("MatMul", [q, kt], f"l{i}.qk"), scale], f"l{i}.scores")
    # causal mask offset by the past length P: query t sees keys 0 .. P + t
    dims = b.op("Shape", [scores], f"l{i}.dims", start=2)
    ones = b.op("ConstantOfShape", [dims], f"l{i}.ones", value=numpy_helper.from_array(np.ones(1, np.float32)))
    past = b.op("Shape", [f"past_key_values.{i}.key"], f"l{i}.past", start=2, end=3)
    past_len = b.op("Squeeze", [past], f"l{i}.past_len")
    allowed = b.op("Trilu", [ones, past_len], f"l{i}.tril", upper=0)
    hidden = b.op("Equal", [allowed, b.const(f"l{i}.zero", np.array(0.0, np.float32))], f"l{i}.hidden")
    masked = b.op("Where", [hidden, b.const(f"l{i}.neg", np.array(-1e9, np.float32)), scores], f"l{i}.masked")
    probs = b.op("Softmax", [masked], f"l{i}.probs", axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [probs, values], f"l{i}.ctx")], f"l{i}.ctx_t", perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [ctx, b.const(f"l{i}.merge", np.array([1, -1, EMBED], np.int64))], f"l{i}.merged")
    return _linear(b, merged, f"l{i}.o", EMBED, EMBED)


def _gelu(b: _Builder, x: str, name: str) -> str:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), GPT-2's gelu_new."""
    cube = b.op("Mul", [b.op("Mul", [x, x], f"{name}.x2"), x], f"{name}.x3")
    inner = b.op("Add", [x, b.op("Mul", [cube, b.const(f"{name}.c", np.array(0.044715, np.float32))], f"{name}.cx3")],
                 f"{name}.inner")
    t = b.op("Tanh", [b.op("Mul", [inner, b.const(f"{name}.s", np.array(np.sqrt(2 / np.pi), np.float32))],
                           f"{name}.scaled")], f"{name}.tanh")
    one_t = b.op("Add", [t, b.const(f"{name}.one", np.array(1.0, np.float32))], f"{name}.1t")
    return b.op("Mul", [b.op("Mul", [x, one_t], f"{name}.x1t"), b.const(f"{name}.half", np.array(0.5, np.float32))],
                f"{name}.out")


def decoder() -> onnx.ModelProto:
    b = _Builder()
    tok = b.op("Gather", [b.weight("wte", (VOCAB, EMBED)), "input_ids"], "tok")
    pos = b.op("Gather", [b.weight("wpe", (MAX_POS, EMBED), 0.05), "position_ids"], "pos")
    h = b.op("Add", [tok, pos], "h0")
    for i in range(LAYERS):
        h = b.op("Add", [h, _attention(b, _layer_norm(b, h, f"l{i}.ln1"), i)], f"l{i}.res1")
        mlp = _linear(b, _gelu(b, _linear(b, _layer_norm(b, h, f"l{i}.ln2"), f"l{i}.fc", EMBED, 4 * EMBED),
                               f"l{i}.gelu"), f"l{i}.proj", 4 * EMBED, EMBED)
        h = b.op("Add", [h, mlp], f"l{i}.res2")
    b.op("MatMul", [_layer_norm(b, h, "ln_f"), b.weight("lm_head", (EMBED, VOCAB))], "logits")
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, "sequence"]) for n in ("input_ids", "position_ids")]
    kv = [helper.make_tensor_value_info(f"past_key_values.{i}.{w}", TensorProto.FLOAT, [1, HEADS, "past", HEAD_DIM])
          for i in range(LAYERS) for w in ("key", "value")]
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "sequence", VOCAB])]
    outs += [helper.make_tensor_value_info(f"present.{i}.{w}", TensorProto.FLOAT, [1, HEADS, "total", HEAD_DIM])
             for i in range(LAYERS) for w in ("key", "value")]
    graph = helper.make_graph(b.nodes, "tiny_decoder", ids + kv, outs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="graphexec")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    onnx.save(decoder(), HERE / "tiny_decoder.onnx")
