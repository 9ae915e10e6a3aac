from gateway.v1 import provider_service_pb2 as _provider_service_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApiKey(_message.Message):
    __slots__ = ("id", "prefix", "kind", "name", "owner", "requests_per_minute", "tokens_per_minute", "budget_usd", "budget_period", "create_time", "expire_time", "revoked", "revoke_time", "mcp_tools")
    ID_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_PERIOD_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TIME_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOLS_FIELD_NUMBER: _ClassVar[int]
    id: str
    prefix: str
    kind: str
    name: str
    owner: str
    requests_per_minute: int
    tokens_per_minute: int
    budget_usd: float
    budget_period: str
    create_time: int
    expire_time: int
    revoked: bool
    revoke_time: int
    mcp_tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., prefix: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., owner: _Optional[str] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., budget_usd: _Optional[float] = ..., budget_period: _Optional[str] = ..., create_time: _Optional[int] = ..., expire_time: _Optional[int] = ..., revoked: _Optional[bool] = ..., revoke_time: _Optional[int] = ..., mcp_tools: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateKeyRequest(_message.Message):
    __slots__ = ("name", "kind", "owner", "requests_per_minute", "tokens_per_minute", "budget_usd", "budget_period", "expire_time", "mcp_tools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_PERIOD_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    owner: str
    requests_per_minute: int
    tokens_per_minute: int
    budget_usd: float
    budget_period: str
    expire_time: int
    mcp_tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., owner: _Optional[str] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., budget_usd: _Optional[float] = ..., budget_period: _Optional[str] = ..., expire_time: _Optional[int] = ..., mcp_tools: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateKeyResponse(_message.Message):
    __slots__ = ("key", "secret")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    secret: str
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListKeysRequest(_message.Message):
    __slots__ = ("kind", "owner", "include_revoked")
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REVOKED_FIELD_NUMBER: _ClassVar[int]
    kind: str
    owner: str
    include_revoked: bool
    def __init__(self, kind: _Optional[str] = ..., owner: _Optional[str] = ..., include_revoked: _Optional[bool] = ...) -> None: ...

class ListKeysResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ...) -> None: ...

class GetKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class GetKeyResponse(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ...) -> None: ...

class RevokeKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class RevokeKeyResponse(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ...) -> None: ...

class ReloadConfigRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReloadConfigResponse(_message.Message):
    __slots__ = ("source", "models", "providers", "warnings")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    source: str
    models: int
    providers: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, source: _Optional[str] = ..., models: _Optional[int] = ..., providers: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class EnableProviderRequest(_message.Message):
    __slots__ = ("provider_id",)
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    provider_id: str
    def __init__(self, provider_id: _Optional[str] = ...) -> None: ...

class EnableProviderResponse(_message.Message):
    __slots__ = ("provider", "model")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    provider: _provider_service_pb2.Provider
    model: str
    def __init__(self, provider: _Optional[_Union[_provider_service_pb2.Provider, _Mapping]] = ..., model: _Optional[str] = ...) -> None: ...

class DisableProviderRequest(_message.Message):
    __slots__ = ("provider_id",)
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    provider_id: str
    def __init__(self, provider_id: _Optional[str] = ...) -> None: ...

class DisableProviderResponse(_message.Message):
    __slots__ = ("provider", "model")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    provider: _provider_service_pb2.Provider
    model: str
    def __init__(self, provider: _Optional[_Union[_provider_service_pb2.Provider, _Mapping]] = ..., model: _Optional[str] = ...) -> None: ...

class GetDashboardRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetDashboardResponse(_message.Message):
    __slots__ = ("time", "providers", "models", "keys", "minutes", "routes", "mcp_servers", "mcp_calls")
    TIME_FIELD_NUMBER: _ClassVar[int]
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    MINUTES_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    MCP_CALLS_FIELD_NUMBER: _ClassVar[int]
    time: int
    providers: _containers.RepeatedCompositeFieldContainer[ProviderStats]
    models: _containers.RepeatedCompositeFieldContainer[ModelPrice]
    keys: _containers.RepeatedCompositeFieldContainer[KeySummary]
    minutes: _containers.RepeatedCompositeFieldContainer[MinuteStats]
    routes: _containers.RepeatedCompositeFieldContainer[RoutingRecord]
    mcp_servers: _containers.RepeatedCompositeFieldContainer[McpServerStats]
    mcp_calls: _containers.RepeatedCompositeFieldContainer[McpCallRecord]
    def __init__(self, time: _Optional[int] = ..., providers: _Optional[_Iterable[_Union[ProviderStats, _Mapping]]] = ..., models: _Optional[_Iterable[_Union[ModelPrice, _Mapping]]] = ..., keys: _Optional[_Iterable[_Union[KeySummary, _Mapping]]] = ..., minutes: _Optional[_Iterable[_Union[MinuteStats, _Mapping]]] = ..., routes: _Optional[_Iterable[_Union[RoutingRecord, _Mapping]]] = ..., mcp_servers: _Optional[_Iterable[_Union[McpServerStats, _Mapping]]] = ..., mcp_calls: _Optional[_Iterable[_Union[McpCallRecord, _Mapping]]] = ...) -> None: ...

class McpServerStats(_message.Message):
    __slots__ = ("id", "transport", "up", "tools", "calls", "errors", "cost_usd")
    ID_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    id: str
    transport: str
    up: bool
    tools: int
    calls: int
    errors: int
    cost_usd: float
    def __init__(self, id: _Optional[str] = ..., transport: _Optional[str] = ..., up: _Optional[bool] = ..., tools: _Optional[int] = ..., calls: _Optional[int] = ..., errors: _Optional[int] = ..., cost_usd: _Optional[float] = ...) -> None: ...

class McpCallRecord(_message.Message):
    __slots__ = ("time", "key", "server", "tool", "outcome", "latency_ms", "cost_usd")
    TIME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    time: int
    key: str
    server: str
    tool: str
    outcome: str
    latency_ms: float
    cost_usd: float
    def __init__(self, time: _Optional[int] = ..., key: _Optional[str] = ..., server: _Optional[str] = ..., tool: _Optional[str] = ..., outcome: _Optional[str] = ..., latency_ms: _Optional[float] = ..., cost_usd: _Optional[float] = ...) -> None: ...

class RetrainRouterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RetrainRouterResponse(_message.Message):
    __slots__ = ("retrained", "detail", "cheapest_rows", "above_rows", "held_out_auc", "previous_auc", "held_out_gain", "previous_gain")
    RETRAINED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    CHEAPEST_ROWS_FIELD_NUMBER: _ClassVar[int]
    ABOVE_ROWS_FIELD_NUMBER: _ClassVar[int]
    HELD_OUT_AUC_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_AUC_FIELD_NUMBER: _ClassVar[int]
    HELD_OUT_GAIN_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_GAIN_FIELD_NUMBER: _ClassVar[int]
    retrained: bool
    detail: str
    cheapest_rows: int
    above_rows: int
    held_out_auc: float
    previous_auc: float
    held_out_gain: float
    previous_gain: float
    def __init__(self, retrained: _Optional[bool] = ..., detail: _Optional[str] = ..., cheapest_rows: _Optional[int] = ..., above_rows: _Optional[int] = ..., held_out_auc: _Optional[float] = ..., previous_auc: _Optional[float] = ..., held_out_gain: _Optional[float] = ..., previous_gain: _Optional[float] = ...) -> None: ...

class ProviderStats(_message.Message):
    __slots__ = ("id", "model", "type", "enabled", "health", "requests", "errors", "error_rate", "mean_latency_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    ERROR_RATE_FIELD_NUMBER: _ClassVar[int]
    MEAN_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    model: str
    type: str
    enabled: bool
    health: str
    requests: int
    errors: int
    error_rate: float
    mean_latency_ms: float
    def __init__(self, id: _Optional[str] = ..., model: _Optional[str] = ..., type: _Optional[str] = ..., enabled: _Optional[bool] = ..., health: _Optional[str] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., error_rate: _Optional[float] = ..., mean_latency_ms: _Optional[float] = ...) -> None: ...

class ModelPrice(_message.Message):
    __slots__ = ("id", "owned_by", "input", "output", "cached_input")
    ID_FIELD_NUMBER: _ClassVar[int]
    OWNED_BY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_FIELD_NUMBER: _ClassVar[int]
    id: str
    owned_by: str
    input: float
    output: float
    cached_input: float
    def __init__(self, id: _Optional[str] = ..., owned_by: _Optional[str] = ..., input: _Optional[float] = ..., output: _Optional[float] = ..., cached_input: _Optional[float] = ...) -> None: ...

class KeySummary(_message.Message):
    __slots__ = ("id", "name", "kind", "requests", "cost_usd", "budget_usd", "remaining_usd")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    REMAINING_USD_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    kind: str
    requests: int
    cost_usd: float
    budget_usd: float
    remaining_usd: float
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., kind: _Optional[str] = ..., requests: _Optional[int] = ..., cost_usd: _Optional[float] = ..., budget_usd: _Optional[float] = ..., remaining_usd: _Optional[float] = ...) -> None: ...

class MinuteStats(_message.Message):
    __slots__ = ("start_time", "requests", "errors", "cost_usd")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    start_time: int
    requests: int
    errors: int
    cost_usd: float
    def __init__(self, start_time: _Optional[int] = ..., requests: _Optional[int] = ..., errors: _Optional[int] = ..., cost_usd: _Optional[float] = ...) -> None: ...

class RoutingRecord(_message.Message):
    __slots__ = ("time", "request_id", "profile", "model")
    TIME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    time: int
    request_id: str
    profile: str
    model: str
    def __init__(self, time: _Optional[int] = ..., request_id: _Optional[str] = ..., profile: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...
