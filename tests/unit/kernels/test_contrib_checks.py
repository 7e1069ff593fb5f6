"""A com.microsoft node whose attributes its kernel refuses fails at compile time (the
registration's ``check``), with the same one line the kernel would give at the first run."""

from __future__ import annotations

import numpy as np
import pytest
from contrib_oracle import feeds_of, one_node, rand

import graphexec as gx
from graphexec.errors import UnsupportedOpError
from graphexec.kernels import registry

B, S, D = 2, 4, 8
i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
_GQA = [rand(B, S, D), rand(B, S, D), rand(B, S, D), None, None, i32(3, 3), i32(4)]
_NBITS = {"K": 16, "N": 4, "block_size": 16}

CASES = [
    ("Attention", [rand(B, S, D), rand(D, 3 * D)], 1, {"num_heads": 2, "do_rotary": 1}, r"do_rotary and past_present"),
    ("Attention", [rand(B, S, D), rand(D, 3 * D)], 1, {}, r"needs attribute 'num_heads'"),
    ("Attention", [rand(B, S, D), rand(D, 3 * D)], 1, {"num_heads": 2, "qkv_hidden_sizes": [8, 4, 12]},
     r"qkv_hidden_sizes \[8, 4, 12\]"),
    ("MultiHeadAttention", [rand(B, S, D), rand(B, S, D), rand(B, S, D)], 1, {"num_heads": 0}, r"num_heads=0"),
    ("GroupQueryAttention", _GQA, 3, {"num_heads": 4, "kv_num_heads": 3}, r"num_heads 4 is not a multiple of kv_num_heads 3"),
    ("GroupQueryAttention", _GQA, 4, {"num_heads": 2, "kv_num_heads": 2}, r"output_qk needs qk_output"),
    ("GroupQueryAttention", _GQA, 3, {"num_heads": 2, "kv_num_heads": 2, "causal": 0, "local_window_size": 2},
     r"local_window_size needs causal=1"),
    ("RotaryEmbedding", [rand(B, S, D), np.array([0], np.int64), rand(16, 4), rand(16, 4)], 1,
     {"is_packed_batching": 1}, r"is_packed_batching"),
    ("FusedMatMul", [rand(3, 4), rand(4, 5)], 1, {"transA": 2}, r"attribute transA=2; expected 0 or 1"),
    ("FusedGemm", [rand(3, 4), rand(4, 5)], 1, {"activation": "Gelu"}, r"activation 'Gelu'"),
    ("FusedConv", [rand(1, 3, 5, 5), rand(2, 3, 3, 3)], 1, {"activation": "LeakyRelu"},
     r"activation LeakyRelu takes 1 parameters"),
    ("BiasSoftmax", [rand(2, 4), rand(2, 4)], 1, {"axis": 1}, r"needs attribute 'is_inner_broadcast'"),
    ("MatMulNBits", [rand(2, 16), np.zeros((4, 1, 18), np.uint8), rand(4, 1)], 1, dict(_NBITS, bits=9),
     r"bits=9 block_size=16"),
]


@pytest.mark.parametrize("op,ins,outs,attrs,why", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_refused_attributes_fail_at_compile_in_one_line(op, ins, outs, attrs, why):
    model = one_node(op, ins, outs, **attrs)
    session = gx.Session(gx.load(model))
    with pytest.raises(UnsupportedOpError, match=rf"^node {op.lower()}_node \(com.microsoft::{op}\): {why}") as e:
        session.compile(feeds_of(model, ins))
    assert "\n" not in str(e.value)


def test_accepted_attributes_compile_and_run():
    ins = [rand(B, S, D), rand(D, 3 * D)]
    model = one_node("Attention", ins, num_heads=2, unidirectional=1)
    out = gx.Session(gx.load(model)).run(feeds_of(model, ins)).outputs
    assert out["out0"].shape == (B, S, D)


def test_a_refusal_the_fallback_can_run_is_left_to_run_time():
    """A check only fails the compile where onnx's reference could not run the node either."""
    old = registry.lookup_def("Relu", "", 17)
    assert old is not None
    registry.update("Relu", "", 17, check=lambda ctx: "refused")
    try:
        x = rand(2, 3)
        model = one_node("Relu", [x], domain="")
        assert gx.Session(gx.load(model)).compile(feeds_of(model, [x])) is not None
    finally:
        registry.update("Relu", "", 17, check=old.check)
