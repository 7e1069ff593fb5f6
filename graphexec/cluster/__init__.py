"""Several cards: the data, pipeline, tensor and auto modes over the single-card executor.

The public face (``graphexec.api.Session``) starts a mode here when ``devices > 1``; the
modes are registered by name in ``cluster/modes.py``.
"""

from graphexec.cluster.modes import REGISTRY, check_spread, implemented, mode_class, one_card, start
from graphexec.cluster.spread import MODES, Cluster, Mode, Spread, split_batch

__all__ = ["MODES", "REGISTRY", "Cluster", "Mode", "Spread", "check_spread", "implemented", "mode_class", "one_card",
           "split_batch", "start"]
