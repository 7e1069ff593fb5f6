"""ACL error codes and the enum values of the ACL API, as the real headers define them.

Codes come from CANN's ``acl_base_rt.h`` and ``error_codes/rt_error_codes.h``
(see docs/ascend-runtime-facts.md §1); enum values from ``acl_rt.h``, so a number
printed by graphexec means what it means on hardware.
"""

from __future__ import annotations

from graphexec.errors import AclError

SUCCESS = 0
INVALID_PARAM = 100000              # ACL-layer argument check (null pointer, bad enum, size 0)
UNINITIALIZE = 100001
REPEAT_INITIALIZE = 100002
REPEAT_FINALIZE = 100037
RT_PARAM_INVALID = 107000           # runtime "invalid value": bad address range, never-recorded event
RT_INVALID_DEVICEID = 107001
RT_CONTEXT_NULL = 107002
RT_STREAM_CONTEXT = 107003
RT_EVENT_TIMESTAMP_INVALID = 107006
RT_EVENT_TIMESTAMP_REVERSAL = 107007
RT_INVALID_HANDLE = 107017          # a destroyed or unknown stream, event, context or pointer
RT_FEATURE_NOT_SUPPORT = 207000     # e.g. peer access between cards that cannot reach each other
RT_MEMORY_ALLOCATION = 207001
RT_NO_EVENT_RESOURCE = 207007
RT_NO_STREAM_RESOURCE = 207008
RT_STREAM_TASK_FULL = 507002
RT_EVENT_NOT_COMPLETE = 507006
RT_AICORE_EXCEPTION = 507015
RT_KERNEL_LOOKUP = 507027
RT_STREAM_SYNC_TIMEOUT = 507046     # what a synchronize that can never return ends in on hardware

NAMES: dict[int, str] = {
    INVALID_PARAM: "ACL_ERROR_INVALID_PARAM",
    UNINITIALIZE: "ACL_ERROR_UNINITIALIZE",
    REPEAT_INITIALIZE: "ACL_ERROR_REPEAT_INITIALIZE",
    REPEAT_FINALIZE: "ACL_ERROR_REPEAT_FINALIZE",
    RT_PARAM_INVALID: "ACL_ERROR_RT_PARAM_INVALID",
    RT_INVALID_DEVICEID: "ACL_ERROR_RT_INVALID_DEVICEID",
    RT_CONTEXT_NULL: "ACL_ERROR_RT_CONTEXT_NULL",
    RT_STREAM_CONTEXT: "ACL_ERROR_RT_STREAM_CONTEXT",
    RT_EVENT_TIMESTAMP_INVALID: "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID",
    RT_EVENT_TIMESTAMP_REVERSAL: "ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL",
    RT_INVALID_HANDLE: "ACL_ERROR_RT_INVALID_HANDLE",
    RT_FEATURE_NOT_SUPPORT: "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
    RT_MEMORY_ALLOCATION: "ACL_ERROR_RT_MEMORY_ALLOCATION",
    RT_NO_EVENT_RESOURCE: "ACL_ERROR_RT_NO_EVENT_RESOURCE",
    RT_NO_STREAM_RESOURCE: "ACL_ERROR_RT_NO_STREAM_RESOURCE",
    RT_STREAM_TASK_FULL: "ACL_ERROR_RT_STREAM_TASK_FULL",
    RT_EVENT_NOT_COMPLETE: "ACL_ERROR_RT_EVENT_NOT_COMPLETE",
    RT_AICORE_EXCEPTION: "ACL_ERROR_RT_AICORE_EXCEPTION",
    RT_KERNEL_LOOKUP: "ACL_ERROR_RT_KERNEL_LOOKUP",
    RT_STREAM_SYNC_TIMEOUT: "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT",
}

# aclrtMemMallocPolicy
MEM_MALLOC_HUGE_FIRST = 0
MEM_MALLOC_HUGE_ONLY = 1
MEM_MALLOC_NORMAL_ONLY = 2
MEM_MALLOC_HUGE_FIRST_P2P = 3    # the same, for buffers a peer card reads or writes
MEM_MALLOC_HUGE_ONLY_P2P = 4
MEM_MALLOC_NORMAL_ONLY_P2P = 5
# aclrtMemcpyKind
MEMCPY_HOST_TO_HOST = 0
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEVICE_TO_DEVICE = 3
MEMCPY_DEFAULT = 4
MEMCPY_INNER_DEVICE_TO_DEVICE = 6
MEMCPY_INTER_DEVICE_TO_DEVICE = 7
# aclrtCallbackBlockType
CALLBACK_NO_BLOCK = 0
CALLBACK_BLOCK = 1
# aclrtEventRecordedStatus
EVENT_RECORDED_STATUS_NOT_READY = 0
EVENT_RECORDED_STATUS_COMPLETE = 1
# aclrtMemAttr
DDR_MEM = 0
HBM_MEM = 1
HBM_MEM_HUGE = 4
HBM_MEM_NORMAL = 5


def acl_error(code: int, message: str) -> AclError:
    """An AclError with the symbolic name of ``code``."""
    return AclError(code, NAMES.get(code, "ACL_ERROR_UNKNOWN"), message)


def invalid_value(message: str) -> AclError:
    """The runtime's "invalid value" (RT_ERROR_INVALID_VALUE maps to 107000)."""
    return acl_error(RT_PARAM_INVALID, message)


def invalid_handle(message: str) -> AclError:
    return acl_error(RT_INVALID_HANDLE, message)


def invalid_param(message: str) -> AclError:
    return acl_error(INVALID_PARAM, message)
