"""Export the torchvision CNNs of the fidelity rows to ONNX, for ``benchmarks/fidelity.py``.

Usage (in an environment with torch and torchvision, e.g. a venv of its own):
    python benchmarks/fidelity_export.py [--out ~/.cache/graphexec/fidelity]

densenet121, googlenet and vgg16 at 3x224x224 with random weights (time does not depend on
them), exported by torch.onnx with a symbolic batch dimension so one file serves every
batch size of ``benchmarks/data/fidelity_calibration.csv``. The files stay out of the
repository (hundreds of MB); fidelity.py runs this script when they are missing.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Callable, Sequence

MODELS = ("densenet121", "googlenet", "vgg16")
DEFAULT_OUT = Path(os.path.expanduser("~/.cache/graphexec/fidelity"))
# the cached file of each model: a new name whenever what is exported changes, so an old
# export in the cache is not taken for the new one
FILES = {"densenet121": "densenet121.onnx", "googlenet": "googlenet-transform_input.onnx", "vgg16": "vgg16.onnx"}


def export(name: str, out: Path) -> Path:
    """``out/FILES[name]`` from torchvision's ``name`` (random weights, eval mode)."""
    import torch
    import torchvision

    # googlenet as ModelZoo's googlenet_pth2onnx.py builds the measured model (ACL_PyTorch/contrib/
    # cv/classfication/GoogleNet): torchvision's pretrained GoogLeNet, whose transform_input=True
    # re-normalizes the input channels inside the graph (3 Gather/Unsqueeze/Mul/Add + a Concat)
    kwargs = {"aux_logits": False, "init_weights": True, "transform_input": True} if name == "googlenet" else {}
    model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
    path = out / FILES[name]
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.onnx.export(model, (x,), str(path), input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return path


def cli(doc: str, models: Sequence[str], make: Callable[[str, Path], Path]) -> None:
    """An export script's command line: ``[--out DIR] [MODEL ...]``, each file's path printed."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("models", nargs="*", default=list(models))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        print(make(name, args.out))


def main() -> None:
    cli(__doc__, MODELS, export)


if __name__ == "__main__":
    main()
