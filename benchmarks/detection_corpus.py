"""torchvision detection models exported to ONNX (random weights), for ml_speed.py --detection.

Usage: python benchmarks/detection_corpus.py [--out DIR] [--size N]

Exports Faster R-CNN (ResNet-50 FPN) and Mask R-CNN with random weights (no download) at an
N x N image (default 320) with torch.onnx's TorchScript exporter (opset 17) into
``~/.cache/graphexec/detection`` with the input image beside it (``<name>.npz``). These
models carry NonMaxSuppression, RoiAlign, TopK and NonZero. torch and torchvision are tools
of the benchmark, not dependencies of graphexec; without them the script says so and stops.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

CACHE = Path(os.environ.get("GRAPHEXEC_DETECTION_CACHE", Path.home() / ".cache" / "graphexec" / "detection"))


def build(out: Path = CACHE, size: int = 320) -> list[Path]:
    """Export each model once (a cached file is kept); the paths."""
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"torch/torchvision not installed ({e}): no detection models")
        return []
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    makers = {"fasterrcnn_resnet50_fpn": torchvision.models.detection.fasterrcnn_resnet50_fpn,
              "maskrcnn_resnet50_fpn": torchvision.models.detection.maskrcnn_resnet50_fpn}
    paths = []
    for name, make in makers.items():
        path = out / f"{name}_{size}.onnx"
        if not path.exists():
            model = make(weights=None, weights_backbone=None, min_size=size, max_size=size).eval()
            image = torch.rand(3, size, size)
            torch.onnx.export(model, ([image],), str(path), opset_version=17, input_names=["image"],
                              dynamo=False)
            np.savez(path.with_suffix(".npz"), image=image.numpy())
        paths.append(path)
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=CACHE)
    p.add_argument("--size", type=int, default=320)
    args = p.parse_args()
    for path in build(args.out, args.size):
        print(path)


if __name__ == "__main__":
    main()
