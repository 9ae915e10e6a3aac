from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
JSON_KEY_FIELD_NUMBER: _ClassVar[int]
json_key: _descriptor.FieldDescriptor
OMIT_EMPTY_FIELD_NUMBER: _ClassVar[int]
omit_empty: _descriptor.FieldDescriptor
NULL_WHEN_EMPTY_FIELD_NUMBER: _ClassVar[int]
null_when_empty: _descriptor.FieldDescriptor
OTHER_KEYS_FIELD_NUMBER: _ClassVar[int]
other_keys: _descriptor.FieldDescriptor
NULL_WHEN_UNSET_FIELD_NUMBER: _ClassVar[int]
null_when_unset: _descriptor.FieldDescriptor
INLINE_FIELD_NUMBER: _ClassVar[int]
inline: _descriptor.FieldDescriptor
CAMEL_CASE_JSON_FIELD_NUMBER: _ClassVar[int]
camel_case_json: _descriptor.FieldDescriptor
