"""Make models/functions_block.onnx and models/functions_block_inline.onnx: one network exported
twice by torch.onnx's TorchScript exporter, once with ``export_modules_as_functions`` and once
inline.

The network is two pre-norm transformer blocks (LayerNorm, 2-head attention, a GELU MLP) and a
softmax head, width 8, randomly initialised (seed 0). Exported with
``export_modules_as_functions={Block, MLP, LayerNorm, GELU}`` the blocks are ONNX functions in
the ``__main__`` domain that call the MLP (``__main__``) and LayerNorm/GELU functions (torch's
module domains), callers listed before their callees, each with its own opset imports: what
graphexec must inline at load so the two files give the same tasks.

torch is needed only to run this script, never by graphexec or its tests (the files are
committed beside it): ``pip install torch==2.13.0`` in a venv, then
``python models/export_functions.py``.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
OUT, OUT_INLINE = HERE / "functions_block.onnx", HERE / "functions_block_inline.onnx"
WIDTH, SHAPE = 8, (2, 5, 8)


def _net():   # type: ignore[no-untyped-def]
    import torch

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.act = torch.nn.Linear(WIDTH, 2 * WIDTH), torch.nn.GELU()
            self.fc2 = torch.nn.Linear(2 * WIDTH, WIDTH)

        def forward(self, x):   # type: ignore[no-untyped-def]
            return self.fc2(self.act(self.fc1(x)))

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln, self.mlp = torch.nn.LayerNorm(WIDTH), MLP()
            self.attn = torch.nn.MultiheadAttention(WIDTH, 2, batch_first=True)

        def forward(self, x):   # type: ignore[no-untyped-def]
            h = self.ln(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.ln(x))

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks, self.head = torch.nn.Sequential(Block(), Block()), torch.nn.Linear(WIDTH, 4)

        def forward(self, x):   # type: ignore[no-untyped-def]
            return self.head(self.blocks(x)).softmax(-1)

    torch.manual_seed(0)
    return Net().eval(), {Block, MLP, torch.nn.LayerNorm, torch.nn.GELU}


def main() -> None:
    import torch

    net, modules = _net()
    x = torch.randn(*SHAPE)
    common = dict(dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
    torch.onnx.export(net, (x,), str(OUT), export_modules_as_functions=modules, **common)
    torch.onnx.export(net, (x,), str(OUT_INLINE), **common)
    print(f"wrote {OUT} and {OUT_INLINE}")


if __name__ == "__main__":
    main()
