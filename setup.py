"""The compiled event loop (graphexec/runtime/_simcore.c) and three kernels (kernels/_dwconv.c,
depthwise convolution; kernels/_qlinear.c, per-tensor 8-bit (de)quantization; kernels/_vmath.c,
erf and Gelu through glibc's libmvec): optional, so an
install with no C compiler (or no libmvec) still works (the Python loop then runs every
simulation, with the same results, and numpy every kernel). -ffp-contract=off keeps every
multiply and add separately rounded, as Python's floats are."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("graphexec.runtime._simcore", ["graphexec/runtime/_simcore.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off"], optional=True),
                   Extension("graphexec.kernels._dwconv", ["graphexec/kernels/_dwconv.c"],
                             extra_compile_args=["-O3", "-ffp-contract=off"], optional=True),
                   Extension("graphexec.kernels._qlinear", ["graphexec/kernels/_qlinear.c"],
                             extra_compile_args=["-O3", "-ffp-contract=off", "-fno-math-errno"], optional=True),
                   Extension("graphexec.kernels._vmath", ["graphexec/kernels/_vmath.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off"], libraries=["mvec", "m"], optional=True)])
