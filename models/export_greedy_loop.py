"""Make models/scripted_greedy_loop.onnx: a greedy decoding loop written in TorchScript
(``torch.jit.script``) and exported by torch.onnx's TorchScript exporter.

Each step embeds the last token, mixes it with the state (a Linear and tanh over their
concatenation), scores 16 tokens and takes the argmax; the tokens go into a Python list that
``torch.stack`` joins at the end. The exporter writes that list as a sequence the Loop
carries: SequenceEmpty before it, SequenceInsert in its body, ConcatFromSequence after it, as
scripted greedy decoders come out. Inputs: ``h`` [batch, 8] (the first state) and ``steps``
(the trip count, a scalar); output ``tokens`` [batch, steps]. Width 8, random weights (seed 0).

torch is needed only to run this script, never by graphexec or its tests (the file is
committed beside it): ``pip install torch==2.13.0`` in a venv, then
``python models/export_greedy_loop.py``.
"""

from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).parent / "scripted_greedy_loop.onnx"
WIDTH, VOCAB = 8, 16


def _decoder():   # type: ignore[no-untyped-def]
    from typing import List

    import torch

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.mix = torch.nn.Embedding(VOCAB, WIDTH), torch.nn.Linear(2 * WIDTH, WIDTH)
            self.out = torch.nn.Linear(WIDTH, VOCAB)

        def forward(self, tok, h):   # type: ignore[no-untyped-def]
            h = torch.tanh(self.mix(torch.cat([self.emb(tok), h], 1)))
            return self.out(h), h

    class Greedy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.step = Step()

        def forward(self, h, steps: torch.Tensor):   # type: ignore[no-untyped-def]
            tok = torch.zeros_like(h[:, 0]).long()
            outs: List[torch.Tensor] = []
            for _ in range(int(steps)):
                logits, h = self.step(tok, h)
                tok = logits.argmax(-1)
                outs.append(tok)
            return torch.stack(outs, 1)

    torch.manual_seed(0)
    return torch.jit.script(Greedy().eval())


def main() -> None:
    import torch

    h, steps = torch.randn(2, WIDTH), torch.tensor(6)
    torch.onnx.export(_decoder(), (h, steps), str(OUT), dynamo=False, opset_version=17, input_names=["h", "steps"],
                      output_names=["tokens"], dynamic_axes={"h": {0: "batch"}, "tokens": {0: "batch", 1: "steps"}})
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
