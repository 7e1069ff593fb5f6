"""IOS's Inception V3 (MLSys'21) built with graphexec's builder, for ``benchmarks/fidelity.py``.

The layer list is that of mit-han-lab/inter-operator-scheduler ``python/ios/models/
inception_v3.py``: 3x299x299 input, every convolution a conv+ReLU block with its batch norm
folded (a Conv with bias, then Relu), max/avg pools, the branches concatenated on channels,
a global average pool at the end (no classifier). Weights are random: time does not
depend on them. The batch dimension is symbolic, so one graph serves every batch size.
"""

from __future__ import annotations

import numpy as np

import graphexec as gx


class _Net:
    """The builder and a seeded generator for the weights."""

    def __init__(self) -> None:
        self.b = gx.GraphBuilder("ios_inception_v3", opset=17)
        self.rng = np.random.default_rng(0)

    def conv(self, x: gx.Tensor, out: int, kernel: tuple[int, int] = (1, 1), stride: tuple[int, int] = (1, 1),
             padding: tuple[int, int] = (0, 0)) -> gx.Tensor:
        """IOS's conv2d: a convolution with bias (batch norm folded) and its ReLU."""
        cin = x.shape[1]
        w = (self.rng.standard_normal((out, cin, *kernel)) * 0.01).astype(np.float32)
        bias = np.zeros(out, np.float32)
        y = self.b.Conv(x, w, bias, kernel_shape=list(kernel), strides=list(stride),
                        pads=[padding[0], padding[1], padding[0], padding[1]])
        return self.b.Relu(y)

    def pool(self, x: gx.Tensor, kind: str, kernel: int = 3, stride: int = 1, padding: int = 0) -> gx.Tensor:
        args = {"kernel_shape": [kernel, kernel], "strides": [stride, stride], "pads": [padding] * 4}
        if kind == "max":
            return self.b.MaxPool(x, **args)
        return self.b.AveragePool(x, count_include_pad=1, **args)

    def cat(self, *xs: gx.Tensor) -> gx.Tensor:
        return self.b.Concat(*xs, axis=1)


def _front(n: _Net, v: gx.Tensor) -> gx.Tensor:
    v = n.conv(v, 32, (3, 3), (2, 2))
    v = n.conv(v, 32, (3, 3))
    v = n.conv(v, 64, (3, 3), padding=(1, 1))
    v = n.pool(v, "max", 3, 2)
    v = n.conv(v, 80)
    v = n.conv(v, 192, (3, 3))
    return n.pool(v, "max", 3, 2)


def _a(n: _Net, v: gx.Tensor, pool_features: int) -> gx.Tensor:
    b1 = n.conv(v, 64)
    b5 = n.conv(n.conv(v, 48), 64, (5, 5), padding=(2, 2))
    b3 = n.conv(n.conv(n.conv(v, 64), 96, (3, 3), padding=(1, 1)), 96, (3, 3), padding=(1, 1))
    bp = n.conv(n.pool(v, "avg", 3, 1, 1), pool_features)
    return n.cat(b1, b5, b3, bp)


def _b(n: _Net, v: gx.Tensor) -> gx.Tensor:
    b3 = n.conv(v, 384, (3, 3), (2, 2))
    bd = n.conv(n.conv(n.conv(v, 64), 96, (3, 3), padding=(1, 1)), 96, (3, 3), (2, 2))
    return n.cat(b3, bd, n.pool(v, "max", 3, 2))


def _c(n: _Net, v: gx.Tensor, c7: int) -> gx.Tensor:
    b1 = n.conv(v, 192)
    b7 = n.conv(n.conv(n.conv(v, c7), c7, (1, 7), padding=(0, 3)), 192, (7, 1), padding=(3, 0))
    bd = n.conv(v, c7)
    for out, k, p in ((c7, (7, 1), (3, 0)), (c7, (1, 7), (0, 3)), (c7, (7, 1), (3, 0)), (192, (1, 7), (0, 3))):
        bd = n.conv(bd, out, k, padding=p)
    bp = n.conv(n.pool(v, "avg", 3, 1, 1), 192)
    return n.cat(b1, b7, bd, bp)


def _d(n: _Net, v: gx.Tensor) -> gx.Tensor:
    b3 = n.conv(n.conv(v, 192), 320, (3, 3), (2, 2))
    b7 = n.conv(n.conv(n.conv(v, 192), 192, (1, 7), padding=(0, 3)), 192, (7, 1), padding=(3, 0))
    b7 = n.conv(b7, 192, (3, 3), (2, 2))
    return n.cat(b3, b7, n.pool(v, "max", 3, 2))


def _e(n: _Net, v: gx.Tensor) -> gx.Tensor:
    b1 = n.conv(v, 320)
    b3 = n.conv(v, 384)
    b3a, b3b = n.conv(b3, 384, (1, 3), padding=(0, 1)), n.conv(b3, 384, (3, 1), padding=(1, 0))
    bd = n.conv(n.conv(v, 448), 384, (3, 3), padding=(1, 1))
    bda, bdb = n.conv(bd, 384, (1, 3), padding=(0, 1)), n.conv(bd, 384, (3, 1), padding=(1, 0))
    bp = n.conv(n.pool(v, "avg", 3, 1, 1), 192)
    return n.cat(b1, b3a, b3b, bda, bdb, bp)


def inception_v3() -> gx.Graph:
    """The whole network: input ``data`` of shape (batch, 3, 299, 299), float32."""
    n = _Net()
    v = _front(n, n.b.input("data", "float32", ["batch", 3, 299, 299]))
    for pool_features in (32, 64, 64):
        v = _a(n, v, pool_features)
    v = _b(n, v)
    for c7 in (128, 160, 160, 192):
        v = _c(n, v, c7)
    v = _e(n, _e(n, _d(n, v)))
    n.b.output(n.b.GlobalAveragePool(v))
    return n.b.build()
