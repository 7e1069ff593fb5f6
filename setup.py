"""The compiled event loop (graphexec/runtime/_simcore.c): optional, so an install with no C
compiler still works (the Python loop then runs every simulation, with the same results).
-ffp-contract=off keeps every multiply and add separately rounded, as Python's floats are."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("graphexec.runtime._simcore", ["graphexec/runtime/_simcore.c"],
                             extra_compile_args=["-O2", "-ffp-contract=off"], optional=True),
                   Extension("graphexec.kernels._dwconv", ["graphexec/kernels/_dwconv.c"],
                             extra_compile_args=["-O3", "-ffp-contract=off"], optional=True)])
