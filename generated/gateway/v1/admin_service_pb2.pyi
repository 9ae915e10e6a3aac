from gateway.v1 import provider_service_pb2 as _provider_service_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApiKey(_message.Message):
    __slots__ = ("id", "prefix", "kind", "name", "owner", "requests_per_minute", "tokens_per_minute", "budget_usd", "budget_period", "create_time", "expire_time", "revoked", "revoke_time")
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
    def __init__(self, id: _Optional[str] = ..., prefix: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., owner: _Optional[str] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., budget_usd: _Optional[float] = ..., budget_period: _Optional[str] = ..., create_time: _Optional[int] = ..., expire_time: _Optional[int] = ..., revoked: _Optional[bool] = ..., revoke_time: _Optional[int] = ...) -> None: ...

class CreateKeyRequest(_message.Message):
    __slots__ = ("name", "kind", "owner", "requests_per_minute", "tokens_per_minute", "budget_usd", "budget_period", "expire_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USD_FIELD_NUMBER: _ClassVar[int]
    BUDGET_PERIOD_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    owner: str
    requests_per_minute: int
    tokens_per_minute: int
    budget_usd: float
    budget_period: str
    expire_time: int
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., owner: _Optional[str] = ..., requests_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., budget_usd: _Optional[float] = ..., budget_period: _Optional[str] = ..., expire_time: _Optional[int] = ...) -> None: ...

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
