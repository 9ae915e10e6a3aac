"""ModerationService: inputs classified on the first of a model's providers that
moderates, in OpenAI's shape."""

from __future__ import annotations

import uuid

from gateway.v1 import moderation_service_pb2 as pb
from google.protobuf import struct_pb2

from server.accounting.accounts import Accounts
from server.application.pipeline.operation_run import operate
from server.application.pipeline.state import Live
from server.base import urls
from server.base.call import Call
from server.base.errors import InvalidArgument
from server.base.moderation import MODERATION, ModerationRequest, Part, Verdict

# OpenAI's limit on inputs per request.
MAX_INPUTS = 32


class ModerationService:
    def __init__(self, live: Live, accounts: Accounts) -> None:
        self.live = live
        self.accounts = accounts

    async def create_moderation(
        self, request: pb.CreateModerationRequest, call: Call
    ) -> pb.CreateModerationResponse:
        state = self.live.current
        principal = await self.accounts.identify(call, "api", state.keys)
        wanted = validated(request)
        run = await operate(
            self.accounts, state, call, principal, request.model, MODERATION, wanted
        )
        assert run.result is not None
        return pb.CreateModerationResponse(
            id=f"modr-{uuid.uuid4().hex}",
            model=run.model.id,
            results=[_result(v) for v in run.result.verdicts],
            usage=run.usage(),
        )


def _result(verdict: Verdict) -> pb.ModerationResult:
    applied = struct_pb2.Struct()
    for category, kinds in verdict.applied.items():
        applied.get_or_create_list(category).extend(kinds)
    return pb.ModerationResult(
        flagged=verdict.flagged,
        categories=dict(verdict.categories),
        category_scores=dict(verdict.scores),
        category_applied_input_types=applied,
    )


def validated(request: pb.CreateModerationRequest) -> ModerationRequest:
    """Checks a CreateModerationRequest; InvalidArgument names the field at fault."""
    if not request.model:
        raise InvalidArgument.for_field("model", "is required")
    value = request.input if request.HasField("input") else None
    kind = value.WhichOneof("kind") if value is not None else None
    if value is None or kind in (None, "null_value"):
        raise InvalidArgument.for_field("input", "is required")
    if kind == "string_value":
        return ModerationRequest(inputs=(_text(value.string_value, "input"),))
    if kind != "list_value":
        raise InvalidArgument.for_field(
            "input", "must be a string, an array of strings, or an array of parts"
        )
    items = value.list_value.values
    if not items:
        raise InvalidArgument.for_field("input", "must not be empty")
    if len(items) > MAX_INPUTS:
        raise InvalidArgument.for_field("input", f"must hold at most {MAX_INPUTS} items")
    if all(item.WhichOneof("kind") == "string_value" for item in items):
        return ModerationRequest(
            inputs=tuple(_text(item.string_value, f"input[{i}]") for i, item in enumerate(items))
        )
    return ModerationRequest(
        parts=tuple(_part(item, f"input[{i}]") for i, item in enumerate(items))
    )


def _text(text: str, at: str) -> str:
    if not text.strip():
        raise InvalidArgument.for_field(at, "must not be empty")
    return text


def _part(item: struct_pb2.Value, at: str) -> Part:
    """`{type: text, text}` or `{type: image_url, image_url: {url}}`."""
    if item.WhichOneof("kind") != "struct_value":
        raise InvalidArgument.for_field(at, "must be a part object (or every item a string)")
    fields = item.struct_value.fields
    kind = fields["type"].string_value if "type" in fields else ""
    if kind == "text":
        text = fields["text"].string_value if "text" in fields else ""
        return Part(text=_text(text, f"{at}.text"))
    if kind == "image_url":
        image = fields["image_url"].struct_value.fields if "image_url" in fields else {}
        url = image["url"].string_value if "url" in image else ""
        if not url:
            raise InvalidArgument.for_field(f"{at}.image_url.url", "is required")
        if not url.startswith("data:"):
            urls.check(url, f"{at}.image_url.url")
        return Part(image_url=url)
    raise InvalidArgument.for_field(f"{at}.type", "must be `text` or `image_url`")
