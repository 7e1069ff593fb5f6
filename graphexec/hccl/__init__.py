"""HCCL collectives over the emulated links: the Hccl* C functions as Python functions.

Names and argument orders follow the C API (``HcclAllReduce(sendBuf, recvBuf, count,
dataType, op, comm, stream)`` is ``hccl.all_reduce(send_buf, recv_buf, count, data_type,
op, comm, stream)``); output parameters become return values and an HcclResult other than
HCCL_SUCCESS becomes ``HcclError`` with ``.code`` and ``.name``. The devices are those of
``acl.init(system=...)``; buffers are device pointers from ``acl.malloc`` on the rank's
device, and each rank's call enqueues its part on a stream of that device.

Example (an 8-card all-reduce):
    >>> from graphexec import acl, hccl
    >>> acl.init(system="atlas800t-a2")
    >>> comms = hccl.comm_init_all(8, list(range(8)))
    >>> for r, comm in enumerate(comms):
    ...     acl.set_device(r)
    ...     hccl.all_reduce(send[r], recv[r], count, hccl.HCCL_DATA_TYPE_FP32, hccl.HCCL_REDUCE_SUM, comm, None)
    >>> for r in range(8):
    ...     acl.set_device(r); acl.synchronize_device()
"""

from __future__ import annotations

from graphexec.errors import HcclError
from graphexec.hccl._algo import collective_us
from graphexec.hccl._coll import all_gather, all_reduce, broadcast, recv, reduce_scatter, send
from graphexec.hccl._comm import Comm, comm_destroy, comm_init_all, get_rank_id, get_rank_size
from graphexec.hccl._types import (
    HCCL_DATA_TYPE_BFP16,
    HCCL_DATA_TYPE_FP16,
    HCCL_DATA_TYPE_FP32,
    HCCL_DATA_TYPE_FP64,
    HCCL_DATA_TYPE_INT8,
    HCCL_DATA_TYPE_INT16,
    HCCL_DATA_TYPE_INT32,
    HCCL_DATA_TYPE_INT64,
    HCCL_DATA_TYPE_UINT8,
    HCCL_DATA_TYPE_UINT16,
    HCCL_DATA_TYPE_UINT32,
    HCCL_DATA_TYPE_UINT64,
    HCCL_E_INTERNAL,
    HCCL_E_MEMORY,
    HCCL_E_NOT_FOUND,
    HCCL_E_NOT_SUPPORT,
    HCCL_E_PARA,
    HCCL_E_PTR,
    HCCL_E_RUNTIME,
    HCCL_E_SYSCALL,
    HCCL_E_TIMEOUT,
    HCCL_E_UNAVAIL,
    HCCL_REDUCE_MAX,
    HCCL_REDUCE_MIN,
    HCCL_REDUCE_PROD,
    HCCL_REDUCE_SUM,
    HCCL_SUCCESS,
)

__all__ = [
    "HcclError", "Comm", "collective_us", "comm_init_all", "comm_destroy", "get_rank_size", "get_rank_id",
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "send", "recv",
    "HCCL_DATA_TYPE_INT8", "HCCL_DATA_TYPE_INT16", "HCCL_DATA_TYPE_INT32", "HCCL_DATA_TYPE_FP16",
    "HCCL_DATA_TYPE_FP32", "HCCL_DATA_TYPE_INT64", "HCCL_DATA_TYPE_UINT64", "HCCL_DATA_TYPE_UINT8",
    "HCCL_DATA_TYPE_UINT16", "HCCL_DATA_TYPE_UINT32", "HCCL_DATA_TYPE_FP64", "HCCL_DATA_TYPE_BFP16",
    "HCCL_REDUCE_SUM", "HCCL_REDUCE_PROD", "HCCL_REDUCE_MAX", "HCCL_REDUCE_MIN",
    "HCCL_SUCCESS", "HCCL_E_PARA", "HCCL_E_PTR", "HCCL_E_MEMORY", "HCCL_E_INTERNAL", "HCCL_E_NOT_SUPPORT",
    "HCCL_E_NOT_FOUND", "HCCL_E_UNAVAIL", "HCCL_E_SYSCALL", "HCCL_E_TIMEOUT", "HCCL_E_RUNTIME",
]
