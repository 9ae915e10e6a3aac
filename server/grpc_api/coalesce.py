"""Text chunks that are ready together go out as one gRPC message.

A gRPC message costs the server about as much CPU as everything else a chunk goes
through (`python -m bench.grpc_floor`), so when several text fragments of a stream are
ready at once (an upstream that answers faster than the caller reads), they are sent
as one chunk. A text delta is defined by concatenation, so a caller cannot tell. Only
plain text fragments of one choice merge: role, finish, tool-call, logprobs and usage
chunks go out as they came, as the contract describes them.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.message import Message

# Merging stops at this much text in one chunk: a caller that reads slowly gets chunks
# of a bounded size, and what is read ahead of it stays small (relay.MAX_AHEAD chunks).
MAX_MERGED_CHARS = 256

# (last, chunk, owned) -> last with chunk's text added (a copy unless owned), or None.
Merge = Callable[[Message, Message, bool], Message | None]

# The fields a text chunk may set: its choice, and those the same in every chunk.
_TEXT_CHUNK = frozenset(
    ("choices", "id", "object", "created", "model", "deployment_id", "system_fingerprint",
     "service_tier")
)  # fmt: skip


def _one_choice(chunk: Message) -> Message | None:
    """The only thing a chunk adds, when that is one choice, else None."""
    fields = chunk.ListFields()
    if any(f.name not in _TEXT_CHUNK for f, _ in fields):
        return None
    choices = chunk.choices
    return choices[0] if len(choices) == 1 else None


def _chat_text(chunk: Message) -> Message | None:
    """The delta of a chat chunk that only adds text to one choice, else None."""
    choice = _one_choice(chunk)
    if choice is None or any(f.name not in ("index", "delta") for f, _ in choice.ListFields()):
        return None
    fields = choice.delta.ListFields()
    if len(fields) != 1 or fields[0][0].name != "content":
        return None
    return choice.delta


def _completion_text(chunk: Message) -> Message | None:
    """The choice of a text-completion chunk that only adds text, else None."""
    choice = _one_choice(chunk)
    if choice is None or any(f.name not in ("index", "text") for f, _ in choice.ListFields()):
        return None
    return choice


def _merging(text_part: Callable[[Message], Message | None], field: str) -> Merge:
    """Merges chunks whose `text_part` is found, by concatenating its `field`."""

    def merge(last: Message, chunk: Message, owned: bool) -> Message | None:
        mine, more = text_part(last), text_part(chunk)
        if mine is None or more is None or not _same_stream(last, chunk):
            return None
        if len(getattr(mine, field)) >= MAX_MERGED_CHARS:
            return None
        merged = last if owned else _copy(last)
        part = text_part(merged)
        setattr(part, field, getattr(part, field) + getattr(more, field))
        return merged

    return merge


_MERGE_CHAT = _merging(_chat_text, "content")
_MERGE_COMPLETION = _merging(_completion_text, "text")


def _copy(message: Message) -> Message:
    """A copy to merge into: the stream's handler may still hold the original."""
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def _same_stream(a: Message, b: Message) -> bool:
    return a.id == b.id and a.model == b.model and a.choices[0].index == b.choices[0].index


def merger(response_type: type[Message]) -> Merge | None:
    """How chunks of this stream merge, or None when its messages are events that
    each go out alone (Messages, Responses, TGI tokens)."""
    fields = response_type.DESCRIPTOR.fields_by_name
    if not all(name in fields for name in ("id", "model", "choices")):
        return None
    choice = fields["choices"].message_type.fields_by_name
    if "delta" in choice:
        return _MERGE_CHAT
    if "text" in choice:
        return _MERGE_COMPLETION
    return None
