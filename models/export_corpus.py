"""Write the exported-model corpus (tests/exported_models.py): networks of the families that
real users bring, randomly initialised (fixed seeds, no weights downloaded), written by the real
exporters, each with its input feeds beside it.

Usage: python models/export_corpus.py --out DIR [NAME ...]

Each NAME writes ``DIR/NAME.onnx`` and one ``DIR/NAME.<feeds>.npz`` per feed set (a decoder
with past key values has a ``prompt`` set, past length 0, and a ``decode`` set, one new token
after 5 past ones). The families: decoder LLMs with their KV cache (Llama and Qwen2 configs of
transformers, the dynamo exporter), encoder/decoder pairs (BERT, T5, BART), a Whisper encoder,
vision backbones (torchvision's ViT, Swin, ConvNeXt, EfficientNet, MobileNetV3, RegNet),
detection (Faster R-CNN, Mask R-CNN, DETR), a diffusers UNet, and classical ML with and
without ZipMap (skl2onnx, onnxmltools). The architectures are the real ones at small widths or
image sizes, so the files stay small and the tests fast.

The exporters are tools of the corpus, never dependencies of graphexec: torch, torchvision,
transformers, diffusers and onnxscript for the networks (a venv, e.g.
``python -m venv ~/.cache/graphexec/torchvenv && ~/.cache/graphexec/torchvenv/bin/pip install
torch torchvision transformers diffusers onnxscript onnxruntime``), scikit-learn, skl2onnx,
onnxmltools and lightgbm for classical ML. A model whose tools are missing exits with status 3
and one line naming the module, so the caller can try another interpreter or skip.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

MISSING = 3          # exit status: a tool this model needs is not installed here
Feeds = dict[str, dict[str, np.ndarray]]


def _seed() -> None:
    import torch

    torch.manual_seed(0)


def _ts(model: Any, args: tuple, path: Path, inputs: list[str], outputs: list[str],
        dynamic: dict[str, dict[int, str]] | None = None, opset: int = 17) -> None:
    """torch.onnx's TorchScript exporter."""
    import torch

    with torch.no_grad():
        torch.onnx.export(model, args, str(path), dynamo=False, opset_version=opset, input_names=inputs,
                          output_names=outputs, dynamic_axes=dynamic or {})


def _dynamo(model: Any, args: tuple, path: Path, inputs: list[str], outputs: list[str],
            shapes: Any = None) -> None:
    """torch.onnx's dynamo exporter (torch.export + onnxscript)."""
    import torch

    program = torch.onnx.export(model, args, dynamo=True, input_names=inputs, output_names=outputs,
                                dynamic_shapes=shapes, optimize=True)
    program.save(str(path), external_data=False)


def _wrap(inner: Any, fn: Callable[..., Any]) -> Any:
    """A module that calls ``fn(inner, *inputs)``, holding ``inner`` as its submodule (so the
    exporter writes its weights as initializers, not as traced constants)."""
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs):   # type: ignore[no-untyped-def]
            return fn(self.inner, *inputs)

    return Wrap().eval()


def _np(*tensors: Any) -> list[np.ndarray]:
    return [t.detach().numpy() for t in tensors]


# ---- decoder LLMs with past key values ------------------------------------------------------

def _decoder(kind: str) -> Callable[[Path], Feeds]:
    def make(path: Path) -> Feeds:
        import torch
        import transformers as tf

        _seed()
        common = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=128, max_position_embeddings=64,
                      attn_implementation="eager", initializer_range=0.3)
        config = tf.LlamaConfig(**common) if kind == "llama" else tf.Qwen2Config(**common)
        lm = (tf.LlamaForCausalLM if kind == "llama" else tf.Qwen2ForCausalLM)(config).eval()
        layers, kv_heads, head = 2, 2, 8

        class Decoder(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.lm = lm

            def forward(self, input_ids, attention_mask, position_ids, *past):   # type: ignore[no-untyped-def]
                cache = tf.DynamicCache(config=config)
                for i in range(layers):
                    cache.update(past[2 * i], past[2 * i + 1], i)
                out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                              past_key_values=cache, use_cache=True)
                kv = out.past_key_values
                return (out.logits, *[t for i in range(layers) for t in (kv.layers[i].keys, kv.layers[i].values)])

        names = [f"{i}.{w}" for i in range(layers) for w in ("key", "value")]
        inputs = ["input_ids", "attention_mask", "position_ids", *(f"past_key_values.{n}" for n in names)]
        outputs = ["logits", *(f"present.{n}" for n in names)]

        def args(past: int, new: int) -> tuple:
            g = torch.Generator().manual_seed(past)
            return (torch.randint(0, 128, (1, new), generator=g), torch.ones(1, past + new, dtype=torch.int64),
                    torch.arange(past, past + new)[None],
                    *(torch.randn(1, kv_heads, past, head, generator=g) for _ in range(2 * layers)))

        seq, total, allk = (torch.export.Dim(n, max=64) for n in ("sequence", "past", "total"))
        shapes = ({1: seq}, {1: allk}, {1: seq}, tuple({2: total} for _ in range(2 * layers)))
        _dynamo(Decoder().eval(), args(3, 2), path, inputs, outputs, shapes)
        return {"prompt": dict(zip(inputs, _np(*args(0, 6)))), "decode": dict(zip(inputs, _np(*args(5, 1))))}
    return make


# ---- encoders and encoder/decoder pairs -------------------------------------------------------

def _bert(path: Path) -> Feeds:
    import torch
    import transformers as tf

    _seed()
    model = tf.BertModel(tf.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                       intermediate_size=64, vocab_size=200, attn_implementation="eager")).eval()
    ids = torch.randint(0, 200, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 8:] = 0
    args = (ids, mask, torch.zeros(2, 12, dtype=torch.int64))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dyn = {n: {0: "batch", 1: "sequence"} for n in names}

    def bert(m, input_ids, attention_mask, token_type_ids):   # type: ignore[no-untyped-def]
        out = m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output

    _ts(_wrap(model, bert), args, path, names, ["last_hidden_state", "pooler_output"], dyn)
    return {"main": dict(zip(names, _np(*args)))}


def _seq2seq(kind: str, part: str) -> Callable[[Path], Feeds]:
    def make(path: Path) -> Feeds:
        import torch
        import transformers as tf

        _seed()
        if kind == "t5":
            model = tf.T5ForConditionalGeneration(tf.T5Config(
                d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=200,
                decoder_start_token_id=0, attn_implementation="eager")).eval()
        else:
            model = tf.BartForConditionalGeneration(tf.BartConfig(
                d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=200,
                max_position_embeddings=64, attn_implementation="eager")).eval()
        ids, mask = torch.randint(3, 200, (1, 10)), torch.ones(1, 10, dtype=torch.int64)
        encoder = model.get_encoder()
        if part == "encoder":
            def enc(e, input_ids, attention_mask):   # type: ignore[no-untyped-def]
                return e(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

            args: tuple = (ids, mask)
            names, outs, dyn = ["input_ids", "attention_mask"], ["last_hidden_state"], {1: "source"}
            _ts(_wrap(encoder, enc), args, path, names, outs, {n: dyn for n in names})
        else:
            with torch.no_grad():
                hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state

            def dec(m, decoder_input_ids, encoder_hidden_states, encoder_attention_mask):   # type: ignore[no-untyped-def]
                return m(decoder_input_ids=decoder_input_ids, encoder_outputs=(encoder_hidden_states,),
                         attention_mask=encoder_attention_mask, use_cache=False).logits

            args = (torch.randint(3, 200, (1, 4)), hidden, mask)
            names = ["decoder_input_ids", "encoder_hidden_states", "encoder_attention_mask"]
            dyn2 = {"decoder_input_ids": {1: "target"}, "encoder_hidden_states": {1: "source"},
                    "encoder_attention_mask": {1: "source"}}
            _ts(_wrap(model, dec), args, path, names, ["logits"], dyn2)
        return {"main": dict(zip(names, _np(*args)))}
    return make


def _whisper_encoder(path: Path) -> Feeds:
    import torch
    import transformers as tf

    _seed()
    model = tf.WhisperModel(tf.WhisperConfig(
        num_mel_bins=80, d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=100,
        max_source_positions=100, max_target_positions=32, pad_token_id=1, bos_token_id=2, eos_token_id=3,
        decoder_start_token_id=2, attn_implementation="eager")).eval()

    def enc(e, input_features):   # type: ignore[no-untyped-def]
        return e(input_features=input_features).last_hidden_state

    args = (torch.randn(1, 80, 200),)
    _ts(_wrap(model.get_encoder(), enc), args, path, ["input_features"], ["last_hidden_state"])
    return {"main": {"input_features": args[0].numpy()}}


# ---- vision ---------------------------------------------------------------------------------

def _vision(name: str, size: int, dynamo: bool) -> Callable[[Path], Feeds]:
    def make(path: Path) -> Feeds:
        import torch
        import torchvision.models as tvm
        from torchvision.models import convnext, swin_transformer, vision_transformer

        _seed()
        nets: dict[str, Callable[[], Any]] = {
            "vit": lambda: vision_transformer.VisionTransformer(
                image_size=size, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                num_classes=10),
            "swin": lambda: swin_transformer.SwinTransformer(
                patch_size=[4, 4], embed_dim=24, depths=[2, 2, 2, 2], num_heads=[1, 2, 4, 8], window_size=[7, 7],
                num_classes=10),
            "convnext": lambda: convnext.ConvNeXt(
                [convnext.CNBlockConfig(24, 48, 2), convnext.CNBlockConfig(48, 96, 2),
                 convnext.CNBlockConfig(96, 192, 2), convnext.CNBlockConfig(192, None, 2)], num_classes=10),
            "efficientnet_b0": lambda: tvm.efficientnet_b0(weights=None, num_classes=10),
            "mobilenet_v3_small": lambda: tvm.mobilenet_v3_small(weights=None, num_classes=10),
            "regnet_y_400mf": lambda: tvm.regnet_y_400mf(weights=None, num_classes=10),
        }
        model = nets[name]().eval()
        args = (torch.rand(2, 3, size, size) * 2 - 1,)
        if dynamo:
            _dynamo(model, args, path, ["image"], ["logits"])
        else:
            _ts(model, args, path, ["image"], ["logits"], {"image": {0: "batch"}})
        return {"main": {"image": args[0].numpy()}}
    return make


# ---- detection and diffusion ------------------------------------------------------------------

def _rcnn(kind: str, size: int) -> Callable[[Path], Feeds]:
    def make(path: Path) -> Feeds:
        import torch
        from torchvision.models import detection
        from torchvision.models.detection.backbone_utils import resnet_fpn_backbone

        _seed()
        if kind == "faster":
            model = detection.fasterrcnn_mobilenet_v3_large_320_fpn(
                weights=None, weights_backbone=None, num_classes=5, min_size=size, max_size=size,
                box_detections_per_img=10)
        else:   # 10 detections: the mask paste is a Loop over them, 100 would take minutes to check
            backbone = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5)
            model = detection.MaskRCNN(backbone, num_classes=5, min_size=size, max_size=size, box_detections_per_img=10)
        model = model.eval()
        image = torch.rand(3, size, size)
        outs = ["boxes", "labels", "scores"] + (["masks"] if kind == "mask" else [])
        _ts(model, ([image],), path, ["image"], outs, opset=17)
        return {"main": {"image": image.numpy()}}
    return make


def _detr(path: Path) -> Feeds:
    import torch
    import transformers as tf

    _seed()
    backbone = tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
                               layer_type="basic", out_features=["stage4"])
    config = tf.DetrConfig(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
                           d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10,
                           num_labels=5)
    model = tf.DetrForObjectDetection(config).eval()

    def detr(m, pixel_values):   # type: ignore[no-untyped-def]
        out = m(pixel_values=pixel_values)
        return out.logits, out.pred_boxes

    args = (torch.rand(1, 3, 128, 128),)
    _ts(_wrap(model, detr), args, path, ["pixel_values"], ["logits", "pred_boxes"])
    return {"main": {"pixel_values": args[0].numpy()}}


def _unet(path: Path) -> Feeds:
    import torch
    from diffusers import UNet2DConditionModel

    _seed()
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=8).eval()

    def step(m, sample, timestep, encoder_hidden_states):   # type: ignore[no-untyped-def]
        return m(sample, timestep, encoder_hidden_states, return_dict=False)[0]

    args = (torch.randn(1, 4, 16, 16), torch.tensor([10.0]), torch.randn(1, 6, 32))
    names = ["sample", "timestep", "encoder_hidden_states"]
    _ts(_wrap(unet, step), args, path, names, ["out_sample"])
    return {"main": dict(zip(names, _np(*args)))}


# ---- classical ML ------------------------------------------------------------------------------

def _classical(kind: str, zipmap: bool) -> Callable[[Path], Feeds]:
    def make(path: Path) -> Feeds:
        from sklearn.datasets import make_classification

        x, y = make_classification(400, 8, n_informative=5, n_classes=3, random_state=0)
        x = x.astype(np.float32)
        if kind == "forest":
            from skl2onnx import to_onnx
            from sklearn.ensemble import RandomForestClassifier
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import StandardScaler

            model = make_pipeline(StandardScaler(), RandomForestClassifier(8, max_depth=5, random_state=0))
            model.fit(x, y)
            onx = to_onnx(model, x[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                          options={id(model.steps[-1][1]): {"zipmap": zipmap}})
        else:
            import lightgbm
            from onnxmltools import convert_lightgbm
            from onnxmltools.convert.common.data_types import FloatTensorType

            model = lightgbm.LGBMClassifier(n_estimators=8, num_leaves=8, verbose=-1, random_state=0).fit(x, y)
            onx = convert_lightgbm(model, initial_types=[("input", FloatTensorType([None, 8]))], target_opset=15,
                                   zipmap=zipmap)
        path.write_bytes(onx.SerializeToString())
        name = onx.graph.input[0].name
        return {"main": {name: x[:32]}}
    return make


MAKERS: dict[str, Callable[[Path], Feeds]] = {
    "llama_kv": _decoder("llama"),
    "qwen2_kv": _decoder("qwen2"),
    "bert_encoder": _bert,
    "t5_encoder": _seq2seq("t5", "encoder"),
    "t5_decoder": _seq2seq("t5", "decoder"),
    "bart_encoder": _seq2seq("bart", "encoder"),
    "bart_decoder": _seq2seq("bart", "decoder"),
    "whisper_encoder": _whisper_encoder,
    "vit_dynamo": _vision("vit", 64, dynamo=True),
    "swin": _vision("swin", 112, dynamo=False),
    "convnext_dynamo": _vision("convnext", 64, dynamo=True),
    "efficientnet_b0": _vision("efficientnet_b0", 64, dynamo=False),
    "mobilenet_v3_small": _vision("mobilenet_v3_small", 64, dynamo=False),
    "regnet_y_400mf": _vision("regnet_y_400mf", 64, dynamo=False),
    "fasterrcnn_mobilenet": _rcnn("faster", 160),
    "maskrcnn_resnet18": _rcnn("mask", 160),
    "detr": _detr,
    "unet2d": _unet,
    "skl_forest_zipmap": _classical("forest", zipmap=True),
    "skl_forest": _classical("forest", zipmap=False),
    "lgbm_zipmap": _classical("lgbm", zipmap=True),
    "lgbm": _classical("lgbm", zipmap=False),
}


def make(name: str, out: Path) -> list[Path]:
    """Write ``name``'s model and feeds into ``out`` (atomically: a reader sees whole files); the paths."""
    out.mkdir(parents=True, exist_ok=True)
    part = out / f"{name}.onnx.part"
    feeds = MAKERS[name](part)
    written = []
    for key, arrays in feeds.items():
        npz = out / f"{name}.{key}.npz"
        with open(npz.with_suffix(".part"), "wb") as f:
            np.savez(f, **arrays)
        npz.with_suffix(".part").replace(npz)
        written.append(npz)
    part.replace(out / f"{name}.onnx")
    return [out / f"{name}.onnx", *written]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("names", nargs="*", help=f"models to write (default all): {', '.join(MAKERS)}")
    args = p.parse_args(argv)
    status = 0
    for name in args.names or list(MAKERS):
        if name not in MAKERS:
            print(f"{name}: unknown model; the models are {', '.join(MAKERS)}", file=sys.stderr)
            return 2
        try:
            paths = make(name, args.out)
        except ImportError as e:
            print(f"{name}: needs {e.name or e} (not installed in {sys.executable})", file=sys.stderr)
            status = MISSING
            continue
        except Exception as e:  # noqa: BLE001 - an exporter's failure is one line; the other models go on
            print(f"{name}: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}",
                  file=sys.stderr)
            status = status or 1
            continue
        print(f"{name}: wrote {', '.join(p.name for p in paths)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
