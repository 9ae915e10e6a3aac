"""The façade's dialect options (rest.proto's error formats, sse.proto's named events)
as bytes and bodies, before any dialect service uses them."""

from __future__ import annotations

from http_facade.errors import ANTHROPIC, OPENAI, error_body, error_status
from http_facade.sse import KEEPALIVE, Framing
from server.base.errors import AllProvidersFailed, InvalidArgument, NotFound, RateLimited


def all_failed() -> AllProvidersFailed:
    return AllProvidersFailed.of("model m", [])


def test_plain_framing_is_the_specs() -> None:
    framing = Framing()
    assert framing.event({"id": "x"}) == b'data: {"id":"x"}\n\n'
    assert framing.keepalive == KEEPALIVE
    error = framing.error(InvalidArgument.for_field("model", "is required"), 0)
    assert error.startswith(b'data: {"error":{"message":"model: is required"')


def test_named_events_take_their_name_from_the_payload() -> None:
    framing = Framing(done=False, name_field="type", keepalive_event="ping",
                      error_format=ANTHROPIC)  # fmt: skip
    assert framing.event({"type": "message_stop"}) == (
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    assert framing.keepalive == b'event: ping\ndata: {"type":"ping"}\n\n'
    # A payload without the field is a `message` event, as SSE names an unnamed one.
    assert framing.event({"id": 1}) == b'event: message\ndata: {"id":1}\n\n'
    message = all_failed().message.encode()
    assert framing.error(all_failed(), 3) == (
        b'event: error\ndata: {"type":"error","error":'
        b'{"type":"overloaded_error","message":"' + message + b'"}}\n\n'
    )


def test_anthropic_error_bodies_and_statuses() -> None:
    missing = NotFound("model 'x' does not exist", {})
    assert error_body(missing, ANTHROPIC) == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model 'x' does not exist"},
    }
    assert error_status(missing, ANTHROPIC) == 404
    limited = RateLimited("slow down", {}, retry_after_s=3)
    assert error_body(limited, ANTHROPIC)["error"]["type"] == "rate_limit_error"
    assert error_status(all_failed(), ANTHROPIC) == 529
    assert error_status(all_failed(), OPENAI) == 503
    assert "error" in error_body(missing, OPENAI) and "type" not in error_body(missing, OPENAI)
