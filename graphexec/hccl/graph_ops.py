"""What a graph split over cards builds its collectives from (``cluster/tensor.py``): the
algorithm choice, its step plan and cost, and the collective op whose parts each rank's
stream runs. The C-style calls (``hccl.all_reduce``, ...) are made of the same pieces.
"""

from graphexec.hccl._algo import choose, estimate_us, link_kinds, plan, reduce_us_per_byte
from graphexec.hccl._comm import Op, Part

__all__ = ["Op", "Part", "choose", "estimate_us", "link_kinds", "plan", "reduce_us_per_byte"]
