"""The exported-model corpus: networks of the families users bring, written by the real
exporters (torch.onnx's TorchScript and dynamo exporters, skl2onnx, onnxmltools) from randomly
initialised weights, where no registry package ships such a model (``real_models.py`` holds the
shipped ones).

Two kinds of entry:
- *committed*: a small file under ``models/`` with the script that wrote it beside it
  (``models/export_*.py``); its feeds are made from its declared inputs (``real_models.make_feeds``).
- *made*: written on first use by ``models/export_corpus.py`` into the cache
  (``$GRAPHEXEC_EXPORT_CACHE``, default ``~/.cache/graphexec/exported``) with its feeds beside it
  (``<model>.<feeds>.npz``). The script runs under the interpreters named by
  ``$GRAPHEXEC_EXPORT_PYTHON`` (``os.pathsep``-separated), else the exporter venv
  ``~/.cache/graphexec/torchvenv`` where there is one, and this interpreter; the first that
  has the model's tools writes it. ``model_path`` returns None when none can, and ``reason``
  says why, so a test skips with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import real_models as rm

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "models" / "export_corpus.py"
MISSING = 3   # export_corpus.py's status for "a tool is not installed here"

FAMILIES = ("decoder_kv", "encoder_decoder", "speech", "vision", "detection", "diffusion", "scripted_loop",
            "functions", "classical_ml", "zipmap", "audio", "torchscript", "dynamo")


@dataclass(frozen=True)
class Made:
    name: str
    model: str                    # the file's stem
    families: tuple[str, ...]
    ops: str                      # ops of note, for the reader
    feeds_set: str = "main"       # made: which <model>.<set>.npz
    committed: bool = False       # models/<model>.onnx, feeds from its declared inputs
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    feeds: dict[str, rm.Feed] = field(default_factory=dict)
    check: rm.Check = rm.Check()


KV = [f"past_key_values.{i}.{w}" for i in range(2) for w in ("key", "value")]
HIDDEN = rm.Check(rtol=1e-4, atol=1e-4, why="hidden states of a few float32 layers with unit-scale random weights")
BOXES = rm.Check(rtol=1e-4, atol=1e-3, why="box coordinates in pixels (0..160) after float32 regression deltas")


def _gpt2(step: str, past: int, new: int) -> Made:
    return Made(f"gpt2_kv_{step}", "gpt2_decoder", ("decoder_kv", "dynamo"), "GPT-2 with KV cache: Attention as "
                "MatMul/Softmax, Concat of past", committed=True,
                shapes={"input_ids": (1, new), "position_ids": (1, new), **{k: (1, 2, past, 8) for k in KV}},
                feeds={"input_ids": rm.Ints(0, 64), "position_ids": rm.Positions(past)})


def _decoder(kind: str, step: str) -> Made:
    return Made(f"{kind}_kv_{step}", f"{kind}_kv", ("decoder_kv", "dynamo"),
                "RoPE (Sin/Cos), RMSNorm, grouped-query attention, SiLU MLP, past Concat", feeds_set=step)


MANIFEST: list[Made] = [
    # ---- decoder LLMs: prompt step (no past) and one decode step after 5 past tokens ----------
    _gpt2("prompt", 0, 6), _gpt2("decode", 5, 1),
    _decoder("llama", "prompt"), _decoder("llama", "decode"),
    _decoder("qwen2", "prompt"), _decoder("qwen2", "decode"),
    # ---- encoders, encoder/decoder pairs, speech ---------------------------------------------
    Made("bert_encoder", "bert_encoder", ("encoder_decoder", "torchscript"), "BERT with a padding mask, Erf GELU"),
    Made("t5_encoder", "t5_encoder", ("encoder_decoder", "torchscript"), "relative position buckets, RMS norm"),
    Made("t5_decoder", "t5_decoder", ("encoder_decoder", "torchscript"), "causal + cross attention, LM head"),
    Made("bart_encoder", "bart_encoder", ("encoder_decoder", "torchscript"), "learned positions, LayerNorm"),
    Made("bart_decoder", "bart_decoder", ("encoder_decoder", "torchscript"), "causal + cross attention"),
    Made("whisper_encoder", "whisper_encoder", ("speech", "encoder_decoder", "torchscript"),
         "Conv1d stem, GELU, sinusoidal positions", check=HIDDEN),
    # ---- vision -------------------------------------------------------------------------------
    Made("vit", "vit_dynamo", ("vision", "dynamo"), "patch Conv, class token, MultiheadAttention"),
    Made("swin", "swin", ("vision", "torchscript"), "shifted windows: Roll as Slice/Concat, Pad, window attention",
         check=HIDDEN),
    Made("convnext", "convnext_dynamo", ("vision", "dynamo"), "depthwise 7x7 Conv, LayerNorm, layer scale",
         check=HIDDEN),
    Made("efficientnet_b0", "efficientnet_b0", ("vision", "torchscript"), "MBConv, SiLU, squeeze-excitation",
         check=HIDDEN),
    Made("mobilenet_v3_small", "mobilenet_v3_small", ("vision", "torchscript"), "HardSwish, HardSigmoid, SE"),
    Made("regnet_y_400mf", "regnet_y_400mf", ("vision", "torchscript"), "grouped Conv, SE", check=HIDDEN),
    # ---- detection and diffusion ------------------------------------------------------------------
    Made("fasterrcnn_mobilenet", "fasterrcnn_mobilenet", ("detection", "torchscript"),
         "NonMaxSuppression, RoiAlign, TopK, NonZero, Loop/If", check=BOXES),
    Made("maskrcnn_resnet18", "maskrcnn_resnet18", ("detection", "torchscript"),
         "NonMaxSuppression, RoiAlign, mask head, Resize paste", check=BOXES),
    Made("detr", "detr", ("detection", "torchscript"), "ResNet backbone, sine positions, query decoder",
         check=HIDDEN),
    Made("unet2d", "unet2d", ("diffusion", "torchscript"), "timestep embedding, GroupNorm, cross attention, "
         "Resize up", check=HIDDEN),
    # ---- committed files: control flow, functions, audio, ZipMap -------------------------------
    Made("scripted_greedy_loop", "scripted_greedy_loop", ("scripted_loop", "torchscript"),
         "Loop carrying a sequence: SequenceEmpty/SequenceInsert/ConcatFromSequence", committed=True,
         shapes={"h": (2, 8)}, feeds={"steps": rm.Const(12)}),
    Made("functions_block", "functions_block", ("functions", "torchscript"),
         "export_modules_as_functions: nested local functions in custom domains", committed=True),
    Made("functions_block_inline", "functions_block_inline", ("functions", "torchscript"),
         "the same network exported inline", committed=True),
    Made("audio_stft", "audio_stft_ts", ("audio", "torchscript"), "STFT on [batch, samples], 3 s of 16 kHz",
         committed=True, shapes={"audio": (1, 48000)}, feeds={"audio": rm.AUDIO}),
    Made("audio_whisper_logmel", "audio_whisper_dynamo", ("audio", "dynamo"), "reflect Pad, complex STFT, "
         "mel MatMul, Log10", committed=True, feeds={"audio": rm.AUDIO}),
    Made("audio_rfft", "audio_rfft_dynamo", ("audio", "dynamo"), "DFT of 16000 samples", committed=True,
         feeds={"audio": rm.AUDIO}, check=rm.Check(steps=0.6, why=(
             "onnxruntime's float32 DFT of a non-power-of-two length drifts ~1e-3 of the largest value from float64 "
             "(graphexec is within 1e-6 of it, tests/e2e/test_audio_front_ends.py): 0.6 steps is 2.4e-3 of the "
             "range"))),
    Made("skl_zipmap_int", "skl_zipmap_int", ("classical_ml", "zipmap"), "LinearClassifier, ZipMap int64 keys",
         committed=True, shapes={"X": (32, 6)}),
    Made("skl_zipmap_str", "skl_zipmap_str", ("classical_ml", "zipmap"), "LinearClassifier, ZipMap string keys",
         committed=True, shapes={"X": (32, 6)}),
    # ---- classical ML made by skl2onnx / onnxmltools, with and without ZipMap ------------------------
    Made("skl_forest_zipmap", "skl_forest_zipmap", ("classical_ml", "zipmap"),
         "Scaler, TreeEnsembleClassifier, ZipMap"),
    Made("skl_forest", "skl_forest", ("classical_ml",), "Scaler, TreeEnsembleClassifier"),
    Made("lgbm_zipmap", "lgbm_zipmap", ("classical_ml", "zipmap"), "onnxmltools LightGBM, ZipMap"),
    Made("lgbm", "lgbm", ("classical_ml",), "onnxmltools LightGBM"),
]


def cache_dir() -> Path:
    return Path(os.environ.get("GRAPHEXEC_EXPORT_CACHE") or "~/.cache/graphexec/exported").expanduser()


def pythons() -> list[str]:
    """The interpreters that may run the export script, first choice first."""
    given = os.environ.get("GRAPHEXEC_EXPORT_PYTHON")
    if given:
        return [p for p in given.split(os.pathsep) if p]
    venv = Path("~/.cache/graphexec/torchvenv/bin/python").expanduser()
    return [str(venv)] * venv.is_file() + [sys.executable]


_REASONS: dict[str, str] = {}


def reason(entry: Made) -> str:
    """Why the last ``model_path(entry)`` returned None."""
    return _REASONS.get(entry.name, "")


def model_path(entry: Made, timeout: float = 1800.0) -> Path | None:
    """The entry's model file, exporting it first if it is not cached; None (see ``reason``) if no
    interpreter here has the tools to write it."""
    if entry.committed:
        return ROOT / "models" / f"{entry.model}.onnx"
    path = cache_dir() / f"{entry.model}.onnx"
    if path.is_file() and (cache_dir() / f"{entry.model}.{entry.feeds_set}.npz").is_file():
        return path
    said = []
    for python in pythons():
        try:
            done = subprocess.run([python, str(SCRIPT), "--out", str(cache_dir()), entry.model], capture_output=True,
                                  text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})
        except (OSError, subprocess.TimeoutExpired) as e:
            said.append(f"{python}: {type(e).__name__}")
            continue
        if done.returncode == 0 and path.is_file():
            return path
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        said.append(lines[-1].strip() if lines else f"{python}: exit status {done.returncode}")
        if done.returncode != MISSING:
            break
    _REASONS[entry.name] = f"{entry.name}: cannot export {entry.model}: " + "; ".join(said)
    return None


def make_feeds(entry: Made, path: Path) -> dict[str, np.ndarray]:
    if entry.committed:
        return rm.make_feeds(entry, path)   # type: ignore[arg-type]  (duck-typed: name, shapes, feeds)
    with np.load(path.with_name(f"{entry.model}.{entry.feeds_set}.npz")) as z:
        return {k: z[k] for k in z.files}


def export_script_models() -> set[str]:
    """The models export_corpus.py can write (it imports only numpy at its top)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_corpus", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.MAKERS)


def entries(family: str | None = None) -> list[Made]:
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; families are: {', '.join(FAMILIES)}")
    return [e for e in MANIFEST if family is None or family in e.families]
