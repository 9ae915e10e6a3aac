"""Which ready chunks merge into one gRPC message: only plain text of one choice, and
never in a way the caller could tell (the originals stay as the handler made them)."""

from __future__ import annotations

from gateway.v1 import chat_service_pb2 as chat
from gateway.v1 import completion_pb2, deployment_service_pb2, router_service_pb2

from server.grpc_api.coalesce import MAX_MERGED_CHARS, merger

MERGE_CHAT = merger(chat.StreamChatCompletionResponse)
MERGE_INFER = merger(router_service_pb2.StreamInferResponse)


def text(content: str, **choice: object) -> chat.StreamChatCompletionResponse:
    return chat.StreamChatCompletionResponse(
        id="c1", model="m", object="chat.completion.chunk",
        choices=[chat.ChatChunkChoice(delta=chat.ChatDelta(content=content), **choice)],
    )  # fmt: skip


def test_text_fragments_merge_into_a_copy() -> None:
    assert MERGE_CHAT is not None
    first, second = text("Hel"), text("lo")
    merged = MERGE_CHAT(first, second, False)
    assert merged is not None and merged.choices[0].delta.content == "Hello"
    assert first.choices[0].delta.content == "Hel"  # the handler's chunk is untouched
    again = MERGE_CHAT(merged, text("!"), True)
    assert again is merged and merged.choices[0].delta.content == "Hello!"


def test_role_finish_tool_logprobs_and_usage_chunks_go_alone() -> None:
    assert MERGE_CHAT is not None
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
        assert MERGE_CHAT(text("a"), other, False) is None
        assert MERGE_CHAT(other, text("a"), False) is None


def test_other_choices_streams_and_long_text_do_not_merge() -> None:
    assert MERGE_CHAT is not None
    assert MERGE_CHAT(text("a"), text("b", index=1), False) is None
    other = text("b")
    other.id = "c2"
    assert MERGE_CHAT(text("a"), other, False) is None
    assert MERGE_CHAT(text("a" * MAX_MERGED_CHARS), text("b"), False) is None


def test_completion_text_merges_and_token_events_do_not() -> None:
    assert MERGE_INFER is not None
    chunk = router_service_pb2.StreamInferResponse
    a = chunk(id="c", model="m", choices=[completion_pb2.CompletionChoice(text="Once")])
    b = chunk(id="c", model="m", choices=[completion_pb2.CompletionChoice(text=" upon")])
    merged = MERGE_INFER(a, b, False)
    assert merged is not None and merged.choices[0].text == "Once upon"
    # A deployment stream of TGI tokens carries one token per event: never merged.
    merge = merger(deployment_service_pb2.StreamInvokeDeploymentResponse)
    assert merge is not None
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
