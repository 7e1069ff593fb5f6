"""The HCCL enums and result codes, as ``hccl_types.h`` defines them, and their numpy meaning.

Values are those of CANN's ``hccl/hccl_types.h`` (HcclResult, HcclReduceOp, HcclDataType;
read in the Ascend/pytorch copy, third_party/hccl/inc/hccl/hccl_types.h), so a number
printed by graphexec means what it means on hardware.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes  # numpy has no bfloat16; onnx (a dependency) brings ml_dtypes
import numpy as np

from graphexec.errors import HcclError

# HcclResult
HCCL_SUCCESS = 0
HCCL_E_PARA = 1             # parameter error
HCCL_E_PTR = 2              # empty pointer
HCCL_E_MEMORY = 3
HCCL_E_INTERNAL = 4
HCCL_E_NOT_SUPPORT = 5
HCCL_E_NOT_FOUND = 6
HCCL_E_UNAVAIL = 7
HCCL_E_SYSCALL = 8
HCCL_E_TIMEOUT = 9
HCCL_E_RUNTIME = 15         # a runtime (ACL) call failed underneath

RESULT_NAMES: dict[int, str] = {
    HCCL_SUCCESS: "HCCL_SUCCESS", HCCL_E_PARA: "HCCL_E_PARA", HCCL_E_PTR: "HCCL_E_PTR",
    HCCL_E_MEMORY: "HCCL_E_MEMORY", HCCL_E_INTERNAL: "HCCL_E_INTERNAL", HCCL_E_NOT_SUPPORT: "HCCL_E_NOT_SUPPORT",
    HCCL_E_NOT_FOUND: "HCCL_E_NOT_FOUND", HCCL_E_UNAVAIL: "HCCL_E_UNAVAIL", HCCL_E_SYSCALL: "HCCL_E_SYSCALL",
    HCCL_E_TIMEOUT: "HCCL_E_TIMEOUT", HCCL_E_RUNTIME: "HCCL_E_RUNTIME",
}

# HcclReduceOp
HCCL_REDUCE_SUM = 0
HCCL_REDUCE_PROD = 1
HCCL_REDUCE_MAX = 2
HCCL_REDUCE_MIN = 3

# HcclDataType
HCCL_DATA_TYPE_INT8 = 0
HCCL_DATA_TYPE_INT16 = 1
HCCL_DATA_TYPE_INT32 = 2
HCCL_DATA_TYPE_FP16 = 3
HCCL_DATA_TYPE_FP32 = 4
HCCL_DATA_TYPE_INT64 = 5
HCCL_DATA_TYPE_UINT64 = 6
HCCL_DATA_TYPE_UINT8 = 7
HCCL_DATA_TYPE_UINT16 = 8
HCCL_DATA_TYPE_UINT32 = 9
HCCL_DATA_TYPE_FP64 = 10
HCCL_DATA_TYPE_BFP16 = 11

DTYPES: dict[int, np.dtype] = {
    HCCL_DATA_TYPE_INT8: np.dtype(np.int8), HCCL_DATA_TYPE_INT16: np.dtype(np.int16),
    HCCL_DATA_TYPE_INT32: np.dtype(np.int32), HCCL_DATA_TYPE_FP16: np.dtype(np.float16),
    HCCL_DATA_TYPE_FP32: np.dtype(np.float32), HCCL_DATA_TYPE_INT64: np.dtype(np.int64),
    HCCL_DATA_TYPE_UINT64: np.dtype(np.uint64), HCCL_DATA_TYPE_UINT8: np.dtype(np.uint8),
    HCCL_DATA_TYPE_UINT16: np.dtype(np.uint16), HCCL_DATA_TYPE_UINT32: np.dtype(np.uint32),
    HCCL_DATA_TYPE_FP64: np.dtype(np.float64), HCCL_DATA_TYPE_BFP16: np.dtype(ml_dtypes.bfloat16),
}

# each reduction is applied pairwise in rank order (rank 0 op rank 1, then op rank 2, ...),
# rounding to the data type at every step, as a chain of two-input reduce tasks would
UFUNCS: dict[int, np.ufunc] = {HCCL_REDUCE_SUM: np.add, HCCL_REDUCE_PROD: np.multiply,
                               HCCL_REDUCE_MAX: np.maximum, HCCL_REDUCE_MIN: np.minimum}
OP_NAMES = {HCCL_REDUCE_SUM: "sum", HCCL_REDUCE_PROD: "prod", HCCL_REDUCE_MAX: "max", HCCL_REDUCE_MIN: "min"}


def hccl_error(code: int, message: str) -> HcclError:
    return HcclError(code, RESULT_NAMES[code], message)


def is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def check_count(count: Any, what: str = "count") -> int:
    if not is_int(count) or count < 0:
        raise hccl_error(HCCL_E_PARA, f"{what} must be an int >= 0, got {count!r}")
    return int(count)


def check_dtype(data_type: Any) -> np.dtype:
    if not is_int(data_type) or int(data_type) not in DTYPES:
        raise hccl_error(HCCL_E_PARA, f"data type {data_type!r} is not an HcclDataType (0..{len(DTYPES) - 1})")
    return DTYPES[int(data_type)]


def check_op(op: Any) -> int:
    if not is_int(op) or int(op) not in UFUNCS:
        raise hccl_error(HCCL_E_PARA, f"reduce op {op!r} is not an HcclReduceOp (0 sum, 1 prod, 2 max, 3 min)")
    return int(op)


def check_rank(rank: Any, size: int, what: str) -> int:
    if not is_int(rank) or not 0 <= rank < size:
        raise hccl_error(HCCL_E_PARA, f"{what} {rank!r} is not a rank of this comm (0..{size - 1})")
    return int(rank)


def reduce(arrays: list[np.ndarray], op: int) -> np.ndarray:
    """``arrays[0] op arrays[1] op ...`` in rank order, in a new array."""
    acc = arrays[0].copy()
    ufunc = UFUNCS[op]
    for a in arrays[1:]:
        ufunc(acc, a, out=acc)
    return acc
