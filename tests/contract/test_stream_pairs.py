"""Each streaming RPC's request holds exactly its unary twin's fields.

Protobuf has no message inheritance, and moving the shared fields into one nested
message would change v1's gRPC wire format (and its field numbers), so each pair keeps
two copies of one field list, and this test keeps the copies identical: name, number,
type, presence, message or enum type, JSON name and options."""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from server.base.pipeline import SERVICES

# A unary RPC's request name -> its streaming twin's, where the names do not pair by
# the Create/Stream rule.
TWINS = {
    "InferRequest": "StreamInferRequest",
    "InvokeDeploymentRequest": "StreamInvokeDeploymentRequest",
    "GenerateTextRequest": "StreamGenerateTextRequest",
    "GenerateContentRequest": "StreamGenerateContentRequest",
    # Gemini streams whole answers: each chunk has the unary answer's fields.
    "GenerateContentResponse": "StreamGenerateContentResponse",
}


def pairs() -> list[tuple[Descriptor, Descriptor]]:
    requests = {
        kind.name: kind
        for service in SERVICES
        for method in service.methods
        for kind in (method.input_type, method.output_type)
        if kind is method.input_type or kind.name in TWINS or kind.name in TWINS.values()
    }
    found = []
    for name, unary in sorted(requests.items()):
        twin = TWINS.get(name) or (
            "Stream" + name[len("Create") :] if name.startswith("Create") else None
        )
        if twin in requests:
            found.append((unary, requests[twin]))
    return found


def shape(field: FieldDescriptor) -> tuple[object, ...]:
    kind = field.message_type or field.enum_type
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        # A map's entry type is nested in its message: compare its key and value.
        entry = field.message_type.fields_by_name
        kind_name: object = ("map", shape(entry["key"]), shape(entry["value"]))
    else:
        kind_name = kind.full_name if kind is not None else None
    return (
        field.name, field.number, field.type, field.has_presence,
        field.is_repeated if hasattr(field, "is_repeated") else field.label,
        kind_name, field.json_name,
        field.GetOptions().SerializeToString(deterministic=True),
    )  # fmt: skip


def test_every_streaming_request_has_a_twin() -> None:
    assert len(pairs()) == 10


@pytest.mark.parametrize("unary,stream", pairs(), ids=lambda d: d.name)
def test_a_streaming_request_holds_its_twins_fields(unary: Descriptor, stream: Descriptor) -> None:
    ours = {f.name: shape(f) for f in unary.fields}
    theirs = {f.name: shape(f) for f in stream.fields}
    assert sorted(ours) == sorted(theirs)
    differ = [name for name in ours if ours[name] != theirs[name]]
    assert not differ, f"{unary.name} and {stream.name} differ in {differ}"
