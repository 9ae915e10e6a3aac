from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_ARGUMENT: _ClassVar[ErrorReason]
    ERROR_REASON_UNAUTHENTICATED: _ClassVar[ErrorReason]
    ERROR_REASON_PERMISSION_DENIED: _ClassVar[ErrorReason]
    ERROR_REASON_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_RATE_LIMITED: _ClassVar[ErrorReason]
    ERROR_REASON_BUDGET_EXHAUSTED: _ClassVar[ErrorReason]
    ERROR_REASON_DEADLINE_EXCEEDED: _ClassVar[ErrorReason]
    ERROR_REASON_CANCELLED: _ClassVar[ErrorReason]
    ERROR_REASON_INTERNAL: _ClassVar[ErrorReason]
    ERROR_REASON_UPSTREAM_ERROR: _ClassVar[ErrorReason]
    ERROR_REASON_ALL_PROVIDERS_FAILED: _ClassVar[ErrorReason]
    ERROR_REASON_UPSTREAM_REJECTED_REQUEST: _ClassVar[ErrorReason]
    ERROR_REASON_REQUEST_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_METHOD_NOT_ALLOWED: _ClassVar[ErrorReason]
    ERROR_REASON_UNKNOWN: _ClassVar[ErrorReason]
    ERROR_REASON_UNKNOWN_PARAMETER: _ClassVar[ErrorReason]
    ERROR_REASON_UNSUPPORTED_CAPABILITY: _ClassVar[ErrorReason]
    ERROR_REASON_MODEL_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_CONFIG_INVALID: _ClassVar[ErrorReason]
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_INVALID_ARGUMENT: ErrorReason
ERROR_REASON_UNAUTHENTICATED: ErrorReason
ERROR_REASON_PERMISSION_DENIED: ErrorReason
ERROR_REASON_NOT_FOUND: ErrorReason
ERROR_REASON_RATE_LIMITED: ErrorReason
ERROR_REASON_BUDGET_EXHAUSTED: ErrorReason
ERROR_REASON_DEADLINE_EXCEEDED: ErrorReason
ERROR_REASON_CANCELLED: ErrorReason
ERROR_REASON_INTERNAL: ErrorReason
ERROR_REASON_UPSTREAM_ERROR: ErrorReason
ERROR_REASON_ALL_PROVIDERS_FAILED: ErrorReason
ERROR_REASON_UPSTREAM_REJECTED_REQUEST: ErrorReason
ERROR_REASON_REQUEST_TOO_LARGE: ErrorReason
ERROR_REASON_METHOD_NOT_ALLOWED: ErrorReason
ERROR_REASON_UNKNOWN: ErrorReason
ERROR_REASON_UNKNOWN_PARAMETER: ErrorReason
ERROR_REASON_UNSUPPORTED_CAPABILITY: ErrorReason
ERROR_REASON_MODEL_NOT_FOUND: ErrorReason
ERROR_REASON_CONFIG_INVALID: ErrorReason
