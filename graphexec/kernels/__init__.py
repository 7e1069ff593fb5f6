"""Kernels: one small numpy function per op, in a registry, plus the onnx fallback.

Importing this package registers every own kernel.
"""

# importing the kernel modules registers their kernels (``binds`` gives some of them binds, after
# importing the modules that register them)
from graphexec.kernels import (  # noqa: F401
    binds,
    contrib_act,
    contrib_attention,
    contrib_gqa,
    contrib_matmul,
    contrib_norm,
    contrib_qattention,
    contrib_quant,
    contrib_qwhere,
    contrib_rotary,
    contrib_shapes,
    conv,
    detection,
    elementwise,
    erf,
    layout,
    ml_ops,
    ml_svm,
    ml_trees,
    ml_zipmap,
    nn,
    norm,
    optional,
    pool,
    quant,
    quant_gemm,
    quant_matmul,
    reduce,
    registry,
    resize,
    rnn,
    selection,
    sequence,
    signal,
    tensor,
)
from graphexec.kernels.registry import OpContext, Unsupported, lookup, register

__all__ = ["OpContext", "Unsupported", "lookup", "register", "registry"]
