from gateway.v1 import provider_service_pb2 as _provider_service_pb2
from gateway.v1 import rest_pb2 as _rest_pb2
from gateway.v1 import sse_pb2 as _sse_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApiKey(_message.Message):
    __slots__ = ("id", "prefix", "kind", "name", "owner", "requests_per_minute", "tokens_per_minute", "budget_usd", "budget_period", "create_time", "expire_time", "revoked", "revoke_time", "mcp_tools", "team", "models")
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
    TEAM_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
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
    team: str
    models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., prefix: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., owner: _Optional[str] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., budget_usd: _Optional[float] = ..., budget_period: _Optional[str] = ..., create_time: _Optional[int] = ..., expire_time: _Optional[int] = ..., revoked: _Optional[bool] = ..., revoke_time: _Optional[int] = ..., mcp_tools: _Optional[_Iterable[str]] = ..., team: _Optional[str] = ..., models: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateKeyRequest(_message.Message):
    __slots__ = ("name", "kind", "owner", "requests_per_minute", "tokens_per_minute", "budget_usd", "budget_period", "expire_time", "mcp_tools", "team", "models")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_PERIOD_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOLS_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    owner: str
    requests_per_minute: int
    tokens_per_minute: int
    budget_usd: float
    budget_period: str
    expire_time: int
    mcp_tools: _containers.RepeatedScalarFieldContainer[str]
    team: str
    models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., owner: _Optional[str] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., budget_usd: _Optional[float] = ..., budget_period: _Optional[str] = ..., expire_time: _Optional[int] = ..., mcp_tools: _Optional[_Iterable[str]] = ..., team: _Optional[str] = ..., models: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateKeyResponse(_message.Message):
    __slots__ = ("key", "secret")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    secret: str
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class ListKeysRequest(_message.Message):
    __slots__ = ("kind", "owner", "include_revoked", "page_size", "page_token", "query", "team", "order_by")
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REVOKED_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    kind: str
    owner: str
    include_revoked: bool
    page_size: int
    page_token: str
    query: str
    team: str
    order_by: str
    def __init__(self, kind: _Optional[str] = ..., owner: _Optional[str] = ..., include_revoked: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., query: _Optional[str] = ..., team: _Optional[str] = ..., order_by: _Optional[str] = ...) -> None: ...

class ListKeysResponse(_message.Message):
    __slots__ = ("keys", "next_page_token", "total_size")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ApiKey]
    next_page_token: str
    total_size: int
    def __init__(self, keys: _Optional[_Iterable[_Union[ApiKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

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

class UpdateKeyRequest(_message.Message):
    __slots__ = ("key_id", "requests_per_minute", "tokens_per_minute", "budget_usd", "budget_period", "owner", "team", "replace_models", "models", "replace_mcp_tools", "mcp_tools", "clear")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_PERIOD_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    TEAM_FIELD_NUMBER: _ClassVar[int]
    REPLACE_MODELS_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_MCP_TOOLS_FIELD_NUMBER: _ClassVar[int]
    MCP_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CLEAR_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    requests_per_minute: int
    tokens_per_minute: int
    budget_usd: float
    budget_period: str
    owner: str
    team: str
    replace_models: bool
    models: _containers.RepeatedScalarFieldContainer[str]
    replace_mcp_tools: bool
    mcp_tools: _containers.RepeatedScalarFieldContainer[str]
    clear: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key_id: _Optional[str] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., budget_usd: _Optional[float] = ..., budget_period: _Optional[str] = ..., owner: _Optional[str] = ..., team: _Optional[str] = ..., replace_models: _Optional[bool] = ..., models: _Optional[_Iterable[str]] = ..., replace_mcp_tools: _Optional[bool] = ..., mcp_tools: _Optional[_Iterable[str]] = ..., clear: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateKeyResponse(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ...) -> None: ...

class RotateKeyRequest(_message.Message):
    __slots__ = ("key_id",)
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    def __init__(self, key_id: _Optional[str] = ...) -> None: ...

class RotateKeyResponse(_message.Message):
    __slots__ = ("key", "secret")
    KEY_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key: ApiKey
    secret: str
    def __init__(self, key: _Optional[_Union[ApiKey, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

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
    __slots__ = ("key_page_size", "key_page_token", "key_ids")
    KEY_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    KEY_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KEY_IDS_FIELD_NUMBER: _ClassVar[int]
    key_page_size: int
    key_page_token: str
    key_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key_page_size: _Optional[int] = ..., key_page_token: _Optional[str] = ..., key_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GetDashboardResponse(_message.Message):
    __slots__ = ("time", "providers", "models", "keys", "minutes", "routes", "mcp_servers", "mcp_calls", "key_next_page_token", "key_total")
    TIME_FIELD_NUMBER: _ClassVar[int]
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    MINUTES_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    MCP_CALLS_FIELD_NUMBER: _ClassVar[int]
    KEY_NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KEY_TOTAL_FIELD_NUMBER: _ClassVar[int]
    time: int
    providers: _containers.RepeatedCompositeFieldContainer[ProviderStats]
    models: _containers.RepeatedCompositeFieldContainer[ModelPrice]
    keys: _containers.RepeatedCompositeFieldContainer[KeySummary]
    minutes: _containers.RepeatedCompositeFieldContainer[MinuteStats]
    routes: _containers.RepeatedCompositeFieldContainer[RoutingRecord]
    mcp_servers: _containers.RepeatedCompositeFieldContainer[McpServerStats]
    mcp_calls: _containers.RepeatedCompositeFieldContainer[McpCallRecord]
    key_next_page_token: str
    key_total: int
    def __init__(self, time: _Optional[int] = ..., providers: _Optional[_Iterable[_Union[ProviderStats, _Mapping]]] = ..., models: _Optional[_Iterable[_Union[ModelPrice, _Mapping]]] = ..., keys: _Optional[_Iterable[_Union[KeySummary, _Mapping]]] = ..., minutes: _Optional[_Iterable[_Union[MinuteStats, _Mapping]]] = ..., routes: _Optional[_Iterable[_Union[RoutingRecord, _Mapping]]] = ..., mcp_servers: _Optional[_Iterable[_Union[McpServerStats, _Mapping]]] = ..., mcp_calls: _Optional[_Iterable[_Union[McpCallRecord, _Mapping]]] = ..., key_next_page_token: _Optional[str] = ..., key_total: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("id", "name", "kind", "requests", "cost_usd", "budget_usd", "remaining_usd", "batch_cost_usd")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    REMAINING_USD_FIELD_NUMBER: _ClassVar[int]
    BATCH_COST_USD_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    kind: str
    requests: int
    cost_usd: float
    budget_usd: float
    remaining_usd: float
    batch_cost_usd: float
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., kind: _Optional[str] = ..., requests: _Optional[int] = ..., cost_usd: _Optional[float] = ..., budget_usd: _Optional[float] = ..., remaining_usd: _Optional[float] = ..., batch_cost_usd: _Optional[float] = ...) -> None: ...

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

class Limits(_message.Message):
    __slots__ = ("budget_usd", "budget_period", "requests_per_minute", "tokens_per_minute", "models")
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_PERIOD_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    budget_usd: float
    budget_period: str
    requests_per_minute: int
    tokens_per_minute: int
    models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, budget_usd: _Optional[float] = ..., budget_period: _Optional[str] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., models: _Optional[_Iterable[str]] = ...) -> None: ...

class Organization(_message.Message):
    __slots__ = ("id", "name", "limits", "spent_usd", "version", "create_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    SPENT_USD_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    limits: Limits
    spent_usd: float
    version: int
    create_time: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., spent_usd: _Optional[float] = ..., version: _Optional[int] = ..., create_time: _Optional[int] = ...) -> None: ...

class Team(_message.Message):
    __slots__ = ("id", "org_id", "name", "limits", "effective_budget_usd", "effective_models", "spent_usd", "version", "create_time", "keys")
    ID_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_MODELS_FIELD_NUMBER: _ClassVar[int]
    SPENT_USD_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    id: str
    org_id: str
    name: str
    limits: Limits
    effective_budget_usd: float
    effective_models: _containers.RepeatedScalarFieldContainer[str]
    spent_usd: float
    version: int
    create_time: int
    keys: int
    def __init__(self, id: _Optional[str] = ..., org_id: _Optional[str] = ..., name: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., effective_budget_usd: _Optional[float] = ..., effective_models: _Optional[_Iterable[str]] = ..., spent_usd: _Optional[float] = ..., version: _Optional[int] = ..., create_time: _Optional[int] = ..., keys: _Optional[int] = ...) -> None: ...

class User(_message.Message):
    __slots__ = ("id", "subject", "email", "create_time", "memberships")
    ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIPS_FIELD_NUMBER: _ClassVar[int]
    id: str
    subject: str
    email: str
    create_time: int
    memberships: _containers.RepeatedCompositeFieldContainer[Membership]
    def __init__(self, id: _Optional[str] = ..., subject: _Optional[str] = ..., email: _Optional[str] = ..., create_time: _Optional[int] = ..., memberships: _Optional[_Iterable[_Union[Membership, _Mapping]]] = ...) -> None: ...

class Membership(_message.Message):
    __slots__ = ("org_id", "team_id", "user_id", "role", "source", "limits", "version")
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    org_id: str
    team_id: str
    user_id: str
    role: str
    source: str
    limits: Limits
    version: int
    def __init__(self, org_id: _Optional[str] = ..., team_id: _Optional[str] = ..., user_id: _Optional[str] = ..., role: _Optional[str] = ..., source: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class CreateOrganizationRequest(_message.Message):
    __slots__ = ("name", "limits")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    name: str
    limits: Limits
    def __init__(self, name: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ...) -> None: ...

class ListOrganizationsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListOrganizationsResponse(_message.Message):
    __slots__ = ("orgs",)
    ORGS_FIELD_NUMBER: _ClassVar[int]
    orgs: _containers.RepeatedCompositeFieldContainer[Organization]
    def __init__(self, orgs: _Optional[_Iterable[_Union[Organization, _Mapping]]] = ...) -> None: ...

class GetOrganizationRequest(_message.Message):
    __slots__ = ("org_id",)
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    org_id: str
    def __init__(self, org_id: _Optional[str] = ...) -> None: ...

class UpdateOrganizationRequest(_message.Message):
    __slots__ = ("id", "limits", "name", "clear", "replace_models", "if_match")
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLEAR_FIELD_NUMBER: _ClassVar[int]
    REPLACE_MODELS_FIELD_NUMBER: _ClassVar[int]
    IF_MATCH_FIELD_NUMBER: _ClassVar[int]
    id: str
    limits: Limits
    name: str
    clear: _containers.RepeatedScalarFieldContainer[str]
    replace_models: bool
    if_match: int
    def __init__(self, id: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., name: _Optional[str] = ..., clear: _Optional[_Iterable[str]] = ..., replace_models: _Optional[bool] = ..., if_match: _Optional[int] = ...) -> None: ...

class UpdateTeamRequest(_message.Message):
    __slots__ = ("id", "limits", "name", "clear", "replace_models", "if_match")
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLEAR_FIELD_NUMBER: _ClassVar[int]
    REPLACE_MODELS_FIELD_NUMBER: _ClassVar[int]
    IF_MATCH_FIELD_NUMBER: _ClassVar[int]
    id: str
    limits: Limits
    name: str
    clear: _containers.RepeatedScalarFieldContainer[str]
    replace_models: bool
    if_match: int
    def __init__(self, id: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., name: _Optional[str] = ..., clear: _Optional[_Iterable[str]] = ..., replace_models: _Optional[bool] = ..., if_match: _Optional[int] = ...) -> None: ...

class CreateTeamRequest(_message.Message):
    __slots__ = ("org_id", "name", "limits")
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    org_id: str
    name: str
    limits: Limits
    def __init__(self, org_id: _Optional[str] = ..., name: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ...) -> None: ...

class ListTeamsRequest(_message.Message):
    __slots__ = ("org_id",)
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    org_id: str
    def __init__(self, org_id: _Optional[str] = ...) -> None: ...

class ListTeamsResponse(_message.Message):
    __slots__ = ("teams",)
    TEAMS_FIELD_NUMBER: _ClassVar[int]
    teams: _containers.RepeatedCompositeFieldContainer[Team]
    def __init__(self, teams: _Optional[_Iterable[_Union[Team, _Mapping]]] = ...) -> None: ...

class GetTeamRequest(_message.Message):
    __slots__ = ("team_id",)
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    team_id: str
    def __init__(self, team_id: _Optional[str] = ...) -> None: ...

class DeleteTeamRequest(_message.Message):
    __slots__ = ("team_id", "revoke_keys")
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    REVOKE_KEYS_FIELD_NUMBER: _ClassVar[int]
    team_id: str
    revoke_keys: bool
    def __init__(self, team_id: _Optional[str] = ..., revoke_keys: _Optional[bool] = ...) -> None: ...

class DeleteTeamResponse(_message.Message):
    __slots__ = ("team_id", "revoked_keys")
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    REVOKED_KEYS_FIELD_NUMBER: _ClassVar[int]
    team_id: str
    revoked_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, team_id: _Optional[str] = ..., revoked_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateUserRequest(_message.Message):
    __slots__ = ("subject", "email")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    subject: str
    email: str
    def __init__(self, subject: _Optional[str] = ..., email: _Optional[str] = ...) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListUsersResponse(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[User]
    def __init__(self, users: _Optional[_Iterable[_Union[User, _Mapping]]] = ...) -> None: ...

class SignOutUserRequest(_message.Message):
    __slots__ = ("user_id",)
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    def __init__(self, user_id: _Optional[str] = ...) -> None: ...

class SignOutUserResponse(_message.Message):
    __slots__ = ("user_id", "sessions_revoked")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_REVOKED_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    sessions_revoked: int
    def __init__(self, user_id: _Optional[str] = ..., sessions_revoked: _Optional[int] = ...) -> None: ...

class PutMembershipRequest(_message.Message):
    __slots__ = ("user_id", "team_id", "org_id", "role", "limits")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    team_id: str
    org_id: str
    role: str
    limits: Limits
    def __init__(self, user_id: _Optional[str] = ..., team_id: _Optional[str] = ..., org_id: _Optional[str] = ..., role: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ...) -> None: ...

class ListMembershipsRequest(_message.Message):
    __slots__ = ("org_id", "team_id", "user_id")
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    org_id: str
    team_id: str
    user_id: str
    def __init__(self, org_id: _Optional[str] = ..., team_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class ListMembershipsResponse(_message.Message):
    __slots__ = ("memberships",)
    MEMBERSHIPS_FIELD_NUMBER: _ClassVar[int]
    memberships: _containers.RepeatedCompositeFieldContainer[Membership]
    def __init__(self, memberships: _Optional[_Iterable[_Union[Membership, _Mapping]]] = ...) -> None: ...

class DeleteMembershipRequest(_message.Message):
    __slots__ = ("user_id", "team_id", "org_id")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    ORG_ID_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    team_id: str
    org_id: str
    def __init__(self, user_id: _Optional[str] = ..., team_id: _Optional[str] = ..., org_id: _Optional[str] = ...) -> None: ...

class DeleteMembershipResponse(_message.Message):
    __slots__ = ("membership",)
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    membership: Membership
    def __init__(self, membership: _Optional[_Union[Membership, _Mapping]] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("seq", "time", "actor", "actor_address", "action", "target", "before", "after", "request_id", "prev_hash", "hash")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTOR_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PREV_HASH_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    seq: int
    time: float
    actor: str
    actor_address: str
    action: str
    target: str
    before: str
    after: str
    request_id: str
    prev_hash: str
    hash: str
    def __init__(self, seq: _Optional[int] = ..., time: _Optional[float] = ..., actor: _Optional[str] = ..., actor_address: _Optional[str] = ..., action: _Optional[str] = ..., target: _Optional[str] = ..., before: _Optional[str] = ..., after: _Optional[str] = ..., request_id: _Optional[str] = ..., prev_hash: _Optional[str] = ..., hash: _Optional[str] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("actor", "action", "target", "start_time", "end_time", "page_size", "page_token")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    actor: str
    action: str
    target: str
    start_time: float
    end_time: float
    page_size: int
    page_token: str
    def __init__(self, actor: _Optional[str] = ..., action: _Optional[str] = ..., target: _Optional[str] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[AuditEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[AuditEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ExportAuditEventsRequest(_message.Message):
    __slots__ = ("format", "actor", "action", "target", "start_time", "end_time")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    format: str
    actor: str
    action: str
    target: str
    start_time: float
    end_time: float
    def __init__(self, format: _Optional[str] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., target: _Optional[str] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ...) -> None: ...

class CreateOrganizationResponse(_message.Message):
    __slots__ = ("org",)
    ORG_FIELD_NUMBER: _ClassVar[int]
    org: Organization
    def __init__(self, org: _Optional[_Union[Organization, _Mapping]] = ...) -> None: ...

class GetOrganizationResponse(_message.Message):
    __slots__ = ("org",)
    ORG_FIELD_NUMBER: _ClassVar[int]
    org: Organization
    def __init__(self, org: _Optional[_Union[Organization, _Mapping]] = ...) -> None: ...

class UpdateOrganizationResponse(_message.Message):
    __slots__ = ("org",)
    ORG_FIELD_NUMBER: _ClassVar[int]
    org: Organization
    def __init__(self, org: _Optional[_Union[Organization, _Mapping]] = ...) -> None: ...

class CreateTeamResponse(_message.Message):
    __slots__ = ("team",)
    TEAM_FIELD_NUMBER: _ClassVar[int]
    team: Team
    def __init__(self, team: _Optional[_Union[Team, _Mapping]] = ...) -> None: ...

class GetTeamResponse(_message.Message):
    __slots__ = ("team",)
    TEAM_FIELD_NUMBER: _ClassVar[int]
    team: Team
    def __init__(self, team: _Optional[_Union[Team, _Mapping]] = ...) -> None: ...

class UpdateTeamResponse(_message.Message):
    __slots__ = ("team",)
    TEAM_FIELD_NUMBER: _ClassVar[int]
    team: Team
    def __init__(self, team: _Optional[_Union[Team, _Mapping]] = ...) -> None: ...

class CreateUserResponse(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: User
    def __init__(self, user: _Optional[_Union[User, _Mapping]] = ...) -> None: ...

class PutMembershipResponse(_message.Message):
    __slots__ = ("membership",)
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    membership: Membership
    def __init__(self, membership: _Optional[_Union[Membership, _Mapping]] = ...) -> None: ...

class ExportAuditEventsResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: AuditEvent
    def __init__(self, event: _Optional[_Union[AuditEvent, _Mapping]] = ...) -> None: ...

class GetShadowReportRequest(_message.Message):
    __slots__ = ("model", "start_time")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    model: str
    start_time: int
    def __init__(self, model: _Optional[str] = ..., start_time: _Optional[int] = ...) -> None: ...

class ShadowSide(_message.Message):
    __slots__ = ("model", "p50_latency_ms", "total_tokens", "cost_usd", "errors")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    P50_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    model: str
    p50_latency_ms: float
    total_tokens: int
    cost_usd: float
    errors: int
    def __init__(self, model: _Optional[str] = ..., p50_latency_ms: _Optional[float] = ..., total_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., errors: _Optional[int] = ...) -> None: ...

class GetShadowReportResponse(_message.Message):
    __slots__ = ("calls", "compared", "agreed", "agreement_rate", "mean_similarity", "original", "candidate")
    CALLS_FIELD_NUMBER: _ClassVar[int]
    COMPARED_FIELD_NUMBER: _ClassVar[int]
    AGREED_FIELD_NUMBER: _ClassVar[int]
    AGREEMENT_RATE_FIELD_NUMBER: _ClassVar[int]
    MEAN_SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    calls: int
    compared: int
    agreed: int
    agreement_rate: float
    mean_similarity: float
    original: ShadowSide
    candidate: ShadowSide
    def __init__(self, calls: _Optional[int] = ..., compared: _Optional[int] = ..., agreed: _Optional[int] = ..., agreement_rate: _Optional[float] = ..., mean_similarity: _Optional[float] = ..., original: _Optional[_Union[ShadowSide, _Mapping]] = ..., candidate: _Optional[_Union[ShadowSide, _Mapping]] = ...) -> None: ...

class GetTrafficRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TrafficLevel(_message.Message):
    __slots__ = ("level", "name", "max_in_flight", "in_flight", "max_wait_s", "priority", "weight")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_S_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    level: str
    name: str
    max_in_flight: int
    in_flight: int
    max_wait_s: float
    priority: str
    weight: float
    def __init__(self, level: _Optional[str] = ..., name: _Optional[str] = ..., max_in_flight: _Optional[int] = ..., in_flight: _Optional[int] = ..., max_wait_s: _Optional[float] = ..., priority: _Optional[str] = ..., weight: _Optional[float] = ...) -> None: ...

class BudgetAlert(_message.Message):
    __slots__ = ("time", "level", "account", "name", "threshold", "spent_usd", "budget_usd")
    TIME_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    SPENT_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    time: float
    level: str
    account: str
    name: str
    threshold: float
    spent_usd: float
    budget_usd: float
    def __init__(self, time: _Optional[float] = ..., level: _Optional[str] = ..., account: _Optional[str] = ..., name: _Optional[str] = ..., threshold: _Optional[float] = ..., spent_usd: _Optional[float] = ..., budget_usd: _Optional[float] = ...) -> None: ...

class GetTrafficResponse(_message.Message):
    __slots__ = ("levels", "waiting", "budget_alerts")
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    BUDGET_ALERTS_FIELD_NUMBER: _ClassVar[int]
    levels: _containers.RepeatedCompositeFieldContainer[TrafficLevel]
    waiting: int
    budget_alerts: _containers.RepeatedCompositeFieldContainer[BudgetAlert]
    def __init__(self, levels: _Optional[_Iterable[_Union[TrafficLevel, _Mapping]]] = ..., waiting: _Optional[int] = ..., budget_alerts: _Optional[_Iterable[_Union[BudgetAlert, _Mapping]]] = ...) -> None: ...
