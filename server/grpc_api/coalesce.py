"""Text chunks that are ready together go out as one gRPC message.

A gRPC message costs the server about as much CPU as everything else a chunk goes
through (`python -m bench.grpc_floor`), so when several text fragments of a stream are
ready at once (an upstream that answers faster than the caller reads), they are sent
as one chunk. A text delta is defined by concatenation, so a caller cannot tell. Only
plain text fragments of one choice merge: role, finish, tool-call, logprobs and usage
chunks go out as they came, as the contract describes them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from google.protobuf.descriptor import Descriptor
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


class _SetsOnly:
    """Whether a message sets no field but the allowed ones. Runs for every chunk, so it
    reads only the other fields, each by the test its kind allows, instead of
    ListFields, which builds every set field's value (3.5 us a chunk, as long as the
    rest of the chunk's way)."""

    __slots__ = ("repeated", "present", "scalars")

    def __init__(self, descriptor: Descriptor, allowed: Collection[str]) -> None:
        others = [f for f in descriptor.fields if f.name not in allowed]
        self.repeated = tuple(f.name for f in others if f.is_repeated)
        self.present = tuple(f.name for f in others if not f.is_repeated and f.has_presence)
        self.scalars = tuple(
            (f.name, f.default_value) for f in others if not f.is_repeated and not f.has_presence
        )

    def __call__(self, message: Message) -> bool:
        for name in self.repeated:
            if len(getattr(message, name)):
                return False
        for name in self.present:
            if message.HasField(name):
                return False
        # Loops, not any()/all(): no generator built for every chunk.
        for name, default in self.scalars:  # noqa: SIM110
            if getattr(message, name) != default:
                return False
        return True


def _only_choice(
    response_type: type[Message], allowed: Collection[str]
) -> Callable[[Message], Message | None]:
    """The only choice of a chunk that adds nothing else, when that choice sets no field
    but the `allowed` ones, else None."""
    chunk_only = _SetsOnly(response_type.DESCRIPTOR, _TEXT_CHUNK)
    choice_type = response_type.DESCRIPTOR.fields_by_name["choices"].message_type
    choice_only = _SetsOnly(choice_type, allowed)

    def only_choice(chunk: Message) -> Message | None:
        choices = chunk.choices
        if len(choices) != 1 or not chunk_only(chunk):
            return None
        choice = choices[0]
        return choice if choice_only(choice) else None

    return only_choice


def _chat_text(response_type: type[Message]) -> Callable[[Message], Message | None]:
    """The delta of a chat chunk that only adds text to one choice, else None."""
    only_choice = _only_choice(response_type, ("index", "delta"))
    choices = response_type.DESCRIPTOR.fields_by_name["choices"].message_type
    delta_only = _SetsOnly(choices.fields_by_name["delta"].message_type, ("content",))

    def text_part(chunk: Message) -> Message | None:
        choice = only_choice(chunk)
        if choice is None:
            return None
        delta = choice.delta
        return delta if delta.HasField("content") and delta_only(delta) else None

    return text_part


class _Merge:
    """One stream's merging. It remembers the text part of the chunk it last saw (the
    one the relay appends next, or the merged one), so each chunk is inspected once."""

    __slots__ = ("text_part", "field", "seen", "seen_part")

    def __init__(self, text_part: Callable[[Message], Message | None], field: str) -> None:
        self.text_part = text_part
        self.field = field
        self.seen: Message | None = None
        self.seen_part: Message | None = None

    def __call__(self, last: Message, chunk: Message, owned: bool) -> Message | None:
        mine = self.seen_part if last is self.seen else self.text_part(last)
        more = self.seen_part = self.text_part(chunk)
        self.seen = chunk
        if mine is None or more is None or not _same_stream(last, chunk):
            return None
        field = self.field
        if len(getattr(mine, field)) >= MAX_MERGED_CHARS:
            return None
        if owned:
            merged, part = last, mine
        else:
            merged = _copy(last)
            part = self.text_part(merged)
            assert part is not None  # a copy of a text chunk
        setattr(part, field, getattr(part, field) + getattr(more, field))
        self.seen, self.seen_part = merged, part
        return merged


def _copy(message: Message) -> Message:
    """A copy to merge into: the stream's handler may still hold the original."""
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def _same_stream(a: Message, b: Message) -> bool:
    return a.id == b.id and a.model == b.model and a.choices[0].index == b.choices[0].index


def merger(response_type: type[Message]) -> Callable[[], Merge] | None:
    """How chunks of this stream type merge (a new Merge for each stream), or None when
    its messages are events that each go out alone (Messages, Responses, TGI tokens)."""
    fields = response_type.DESCRIPTOR.fields_by_name
    if not all(name in fields for name in ("id", "model", "choices")):
        return None
    choice = fields["choices"].message_type.fields_by_name
    if "delta" in choice:
        chat_text = _chat_text(response_type)
        return lambda: _Merge(chat_text, "content")
    if "text" in choice:
        # A text-completion chunk's text part is its choice.
        completion_text = _only_choice(response_type, ("index", "text"))
        return lambda: _Merge(completion_text, "text")
    return None
