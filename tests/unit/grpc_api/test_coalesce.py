"""Which ready chunks merge into one gRPC message: only plain text of one choice, and
never in a way the caller could tell (the originals stay as the handler made them)."""

from __future__ import annotations

from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import completion_pb2, deployment_service_pb2, router_service_pb2

from server.grpc_api.coalesce import MAX_MERGED_CHARS, _SetsOnly, merger

NEW_CHAT_MERGE = merger(chat.StreamChatCompletionResponse)
NEW_INFER_MERGE = merger(router_service_pb2.StreamInferResponse)


def text(content: str, **choice: object) -> chat.StreamChatCompletionResponse:
    return chat.StreamChatCompletionResponse(
        id="c1", model="m", object="chat.completion.chunk",
        choices=[chat.ChatChunkChoice(delta=chat.ChatDelta(content=content), **choice)],
    )  # fmt: skip


def test_text_fragments_merge_into_a_copy() -> None:
    assert NEW_CHAT_MERGE is not None
    merge_chat = NEW_CHAT_MERGE()
    first, second = text("Hel"), text("lo")
    merged = merge_chat(first, second, False)
    assert merged is not None and merged.choices[0].delta.content == "Hello"
    assert first.choices[0].delta.content == "Hel"  # the handler's chunk is untouched
    again = merge_chat(merged, text("!"), True)
    assert again is merged and merged.choices[0].delta.content == "Hello!"


def test_role_finish_tool_logprobs_and_usage_chunks_go_alone() -> None:
    assert NEW_CHAT_MERGE is not None
    merge_chat = NEW_CHAT_MERGE()
    role = chat.StreamChatCompletionResponse(
        id="c1", model="m", choices=[chat.ChatChunkChoice(delta=chat.ChatDelta(role="assistant"))]
    )
    finish = text("", finish_reason="stop")
    finish.choices[0].delta.ClearField("content")
    tool = text("x")
    tool.choices[0].delta.tool_calls.add(index=0, id="t1")
    logprobs = text("x")
    logprobs.choices[0].logprobs.SetInParent()
    usage = text("x")
    usage.usage.completion_tokens = 3
    for other in (role, finish, tool, logprobs, usage):
        assert merge_chat(text("a"), other, False) is None
        assert merge_chat(other, text("a"), False) is None


def test_other_choices_streams_and_long_text_do_not_merge() -> None:
    assert NEW_CHAT_MERGE is not None
    merge_chat = NEW_CHAT_MERGE()
    assert merge_chat(text("a"), text("b", index=1), False) is None
    other = text("b")
    other.id = "c2"
    assert merge_chat(text("a"), other, False) is None
    assert merge_chat(text("a" * MAX_MERGED_CHARS), text("b"), False) is None


def infer(text: str) -> router_service_pb2.StreamInferResponse:
    return router_service_pb2.StreamInferResponse(
        id="c", model="m", choices=[completion_pb2.CompletionChoice(text=text)]
    )


def test_completion_text_merges_and_token_events_do_not() -> None:
    assert NEW_INFER_MERGE is not None
    merge_infer = NEW_INFER_MERGE()
    merged = merge_infer(infer("Once"), infer(" upon"), False)
    assert merged is not None and merged.choices[0].text == "Once upon"
    # A deployment stream of TGI tokens carries one token per event: never merged.
    new_merge = merger(deployment_service_pb2.StreamInvokeDeploymentResponse)
    assert new_merge is not None
    merge = new_merge()
    token = deployment_service_pb2.StreamInvokeDeploymentResponse
    x = token(id="c", model="m", choices=[completion_pb2.CompletionChoice(text="a")])
    y = token(id="c", model="m", choices=[completion_pb2.CompletionChoice(text="b")])
    x.token.text, y.token.text = "a", "b"
    assert merge(x, y, False) is None
    plain = token(id="c", model="m", choices=[completion_pb2.CompletionChoice(text="a")])
    assert (
        merge(
            plain,
            token(id="c", model="m", choices=[completion_pb2.CompletionChoice(text="b")]),
            False,
        )
        is not None
    )


def test_event_streams_have_no_merger() -> None:
    from gateway.v1 import messages_service_pb2, responses_service_pb2

    assert merger(messages_service_pb2.StreamMessageResponse) is None
    assert merger(responses_service_pb2.StreamResponseResponse) is None


def test_a_routed_chunk_goes_alone() -> None:
    assert NEW_INFER_MERGE is not None
    merge = NEW_INFER_MERGE()
    routed = infer(" upon")
    routed.route.profile = "balanced"
    assert merge(infer("Once"), routed, False) is None
    assert merge(routed, infer("Once"), False) is None


def test_a_chunk_the_merge_did_not_see_last_is_inspected_again() -> None:
    assert NEW_CHAT_MERGE is not None
    merge = NEW_CHAT_MERGE()
    merged = merge(text("a"), text("b"), False)
    assert merged is not None and merged.choices[0].delta.content == "ab"
    assert merge(merged, text("c"), True) is merged  # the one it made: merged in place
    usage = text("x")
    usage.usage.completion_tokens = 1
    assert merge(usage, text("d"), False) is None  # not the last it saw: read afresh
    assert merged.choices[0].delta.content == "abc"


def test_any_field_outside_the_allowed_ones_counts_of_every_kind() -> None:
    only_index = _SetsOnly(completion_pb2.CompletionChoice.DESCRIPTOR, ("index",))
    assert only_index(completion_pb2.CompletionChoice(index=2))
    assert not only_index(completion_pb2.CompletionChoice(text="a"))  # a plain scalar
    assert not only_index(completion_pb2.CompletionChoice(finish_reason=""))  # present, empty
    with_logprobs = completion_pb2.CompletionChoice()
    with_logprobs.logprobs.SetInParent()
    assert not only_index(with_logprobs)  # a message
    only_id = _SetsOnly(chat.StreamChatCompletionResponse.DESCRIPTOR, ("id",))
    assert not only_id(text(""))  # a repeated field
