"""The codec's shapes for dialects with open objects: a key shared by an array field,
an object field and a plain one (chosen by the JSON value's kind), and an `other_keys`
Struct that holds the keys no field names, read even when strict."""

from __future__ import annotations

from gateway.v1 import messages_pb2 as pb

from http_facade import codec


def test_a_shared_key_goes_to_the_field_of_its_kind() -> None:
    for content, field in (
        ("text", "content"),
        ([{"type": "text", "text": "x"}], "content_blocks"),
        ({"type": "code_execution_result", "stdout": "x"}, "content_object"),
    ):
        block = codec.from_dict({"type": "tool_result", "content": content}, pb.ContentBlock(),
                                strict=True)  # fmt: skip
        assert block.HasField(field) if field != "content_blocks" else block.content_blocks
        assert codec.to_dict(block) == {"type": "tool_result", "content": content}
    cited = {"type": "text", "text": "x", "citations": [{"type": "char_location", "n": 1}]}
    assert codec.to_dict(codec.from_dict(cited, pb.ContentBlock(), strict=True)) == cited
    config = {"type": "document", "citations": {"enabled": True}}
    block = codec.from_dict(config, pb.ContentBlock(), strict=True)
    assert block.citations_config.enabled and codec.to_dict(block) == config


def test_other_keys_are_read_and_written_beside_the_fields() -> None:
    raw = {"type": "web_search_result", "title": "T", "url": "https://x", "page_age": None,
           "encrypted_content": "e", "nested": {"b": [1, 2.5], "a": True}}  # fmt: skip
    block = codec.from_dict(raw, pb.ContentBlock(), strict=True)
    assert set(block.other.fields) == {"url", "encrypted_content", "nested"}
    written = codec.to_dict(block)
    assert written == {k: v for k, v in raw.items() if v is not None}
    # A Struct's keys come out sorted, whatever order the map keeps.
    assert list(written["nested"]) == ["a", "b"]
