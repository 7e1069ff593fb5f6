"""Export the torchvision models of the held-out rows (``benchmarks/data/heldout_models.csv``)
to ONNX, beside the fidelity models in ``~/.cache/graphexec/fidelity``.

Usage (in an environment with torch and torchvision, e.g. a venv of its own):
    python benchmarks/heldout_export.py [--out ~/.cache/graphexec/fidelity] [NAME...]

Random weights (time does not depend on them), eval mode, a symbolic batch dimension, opset
17, as ``fidelity_export.py`` does; inception_v3 at 299x299 without its auxiliary head (the
inference graph), the rest at 224x224.
"""

from __future__ import annotations

from pathlib import Path

from fidelity_export import cli

MODELS = ("mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0", "inception_v3", "regnet_x_1_6gf",
          "resnext101_32x8d")


def export(name: str, out: Path) -> Path:
    import torch
    import torchvision

    kwargs = {"aux_logits": False, "init_weights": True} if name == "inception_v3" else {}
    model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
    side = 299 if name == "inception_v3" else 224
    path = out / f"{name}.onnx"
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(1, 3, side, side),), str(path), input_names=["input"],
                          output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return path


def main() -> None:
    cli(__doc__, MODELS, export)


if __name__ == "__main__":
    main()
