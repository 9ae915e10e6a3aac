from gateway.v1 import json_mapping_pb2 as _json_mapping_pb2
from gateway.v1 import rest_pb2 as _rest_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateImageRequest(_message.Message):
    __slots__ = ("prompt", "model", "n", "size", "quality", "response_format", "output_format", "background", "output_compression", "style", "moderation", "user")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    STYLE_FIELD_NUMBER: _ClassVar[int]
    MODERATION_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    model: str
    n: int
    size: str
    quality: str
    response_format: str
    output_format: str
    background: str
    output_compression: int
    style: str
    moderation: str
    user: str
    def __init__(self, prompt: _Optional[str] = ..., model: _Optional[str] = ..., n: _Optional[int] = ..., size: _Optional[str] = ..., quality: _Optional[str] = ..., response_format: _Optional[str] = ..., output_format: _Optional[str] = ..., background: _Optional[str] = ..., output_compression: _Optional[int] = ..., style: _Optional[str] = ..., moderation: _Optional[str] = ..., user: _Optional[str] = ...) -> None: ...

class ImageFile(_message.Message):
    __slots__ = ("data", "filename")
    DATA_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    filename: str
    def __init__(self, data: _Optional[bytes] = ..., filename: _Optional[str] = ...) -> None: ...

class EditImageRequest(_message.Message):
    __slots__ = ("image", "mask", "prompt", "model", "n", "size", "quality", "response_format", "output_format", "background", "output_compression", "user")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    MASK_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    image: _containers.RepeatedCompositeFieldContainer[ImageFile]
    mask: ImageFile
    prompt: str
    model: str
    n: int
    size: str
    quality: str
    response_format: str
    output_format: str
    background: str
    output_compression: int
    user: str
    def __init__(self, image: _Optional[_Iterable[_Union[ImageFile, _Mapping]]] = ..., mask: _Optional[_Union[ImageFile, _Mapping]] = ..., prompt: _Optional[str] = ..., model: _Optional[str] = ..., n: _Optional[int] = ..., size: _Optional[str] = ..., quality: _Optional[str] = ..., response_format: _Optional[str] = ..., output_format: _Optional[str] = ..., background: _Optional[str] = ..., output_compression: _Optional[int] = ..., user: _Optional[str] = ...) -> None: ...

class Image(_message.Message):
    __slots__ = ("b64_json", "url", "revised_prompt")
    B64_JSON_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    REVISED_PROMPT_FIELD_NUMBER: _ClassVar[int]
    b64_json: str
    url: str
    revised_prompt: str
    def __init__(self, b64_json: _Optional[str] = ..., url: _Optional[str] = ..., revised_prompt: _Optional[str] = ...) -> None: ...

class ImageInputTokens(_message.Message):
    __slots__ = ("text_tokens", "image_tokens")
    TEXT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    text_tokens: int
    image_tokens: int
    def __init__(self, text_tokens: _Optional[int] = ..., image_tokens: _Optional[int] = ...) -> None: ...

class ImageUsage(_message.Message):
    __slots__ = ("input_tokens", "input_tokens_details", "output_tokens", "total_tokens", "total_cost_usd", "billed_unit")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_DETAILS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_FIELD_NUMBER: _ClassVar[int]
    BILLED_UNIT_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    input_tokens_details: ImageInputTokens
    output_tokens: int
    total_tokens: int
    total_cost_usd: float
    billed_unit: str
    def __init__(self, input_tokens: _Optional[int] = ..., input_tokens_details: _Optional[_Union[ImageInputTokens, _Mapping]] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., total_cost_usd: _Optional[float] = ..., billed_unit: _Optional[str] = ...) -> None: ...

class CreateImageResponse(_message.Message):
    __slots__ = ("created", "data", "output_format", "size", "quality", "background", "usage")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    created: int
    data: _containers.RepeatedCompositeFieldContainer[Image]
    output_format: str
    size: str
    quality: str
    background: str
    usage: ImageUsage
    def __init__(self, created: _Optional[int] = ..., data: _Optional[_Iterable[_Union[Image, _Mapping]]] = ..., output_format: _Optional[str] = ..., size: _Optional[str] = ..., quality: _Optional[str] = ..., background: _Optional[str] = ..., usage: _Optional[_Union[ImageUsage, _Mapping]] = ...) -> None: ...

class EditImageResponse(_message.Message):
    __slots__ = ("created", "data", "output_format", "size", "quality", "background", "usage")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    QUALITY_FIELD_NUMBER: _ClassVar[int]
    BACKGROUND_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    created: int
    data: _containers.RepeatedCompositeFieldContainer[Image]
    output_format: str
    size: str
    quality: str
    background: str
    usage: ImageUsage
    def __init__(self, created: _Optional[int] = ..., data: _Optional[_Iterable[_Union[Image, _Mapping]]] = ..., output_format: _Optional[str] = ..., size: _Optional[str] = ..., quality: _Optional[str] = ..., background: _Optional[str] = ..., usage: _Optional[_Union[ImageUsage, _Mapping]] = ...) -> None: ...
