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

MODELS = ("densenet121", "googlenet", "vgg16")
DEFAULT_OUT = Path(os.path.expanduser("~/.cache/graphexec/fidelity"))


def export(name: str, out: Path) -> Path:
    """``out/name.onnx`` from torchvision's ``name`` (random weights, eval mode)."""
    import torch
    import torchvision

    kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
    path = out / f"{name}.onnx"
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.onnx.export(model, (x,), str(path), input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                          opset_version=17, dynamo=False)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("models", nargs="*", default=list(MODELS))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        print(export(name, args.out))


if __name__ == "__main__":
    main()
