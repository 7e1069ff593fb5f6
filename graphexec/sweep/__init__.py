"""Grids of configurations (models x chips x streams x policies x cards), locally or on Ray.

``graphexec.sweep(...)`` (re-exported at the top) is :func:`graphexec.sweep.run.sweep`.
"""

from graphexec.sweep.run import BACKENDS, sweep

__all__ = ["BACKENDS", "sweep"]
