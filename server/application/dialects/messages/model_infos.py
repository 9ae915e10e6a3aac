"""The model list in Anthropic's shape (`ModelInfo`, cursor pages), for Anthropic
clients asking `GET /v1/models` with `anthropic-version`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from gateway.v1 import messages_pb2 as pb
from gateway.v1 import messages_service_pb2 as service

from server.base.config import ModelConfig
from server.base.errors import InvalidArgument

DEFAULT_LIMIT = 20
MAX_LIMIT = 1000


def info(model: ModelConfig) -> pb.ModelInfo:
    created = datetime.fromtimestamp(model.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return pb.ModelInfo(type="model", id=model.id, display_name=model.id, created_at=created)


def page(
    models: Sequence[ModelConfig], request: service.ListModelInfosRequest
) -> service.ListModelInfosResponse:
    """The models after `after_id` (or before `before_id`), at most `limit`."""
    limit = request.limit if request.HasField("limit") else DEFAULT_LIMIT
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument.for_field("limit", f"must be between 1 and {MAX_LIMIT}")
    ids = [m.id for m in models]
    start, end = 0, len(models)
    for name in ("after_id", "before_id"):
        if request.HasField(name):
            cursor = getattr(request, name)
            if cursor not in ids:
                raise InvalidArgument.for_field(name, f"names no model: {cursor!r}")
            if name == "after_id":
                start = ids.index(cursor) + 1
            else:
                end = ids.index(cursor)
    chosen = models[start:end]
    # With before_id the page is the one just before the cursor.
    shown = chosen[-limit:] if request.HasField("before_id") else chosen[:limit]
    data = [info(m) for m in shown]
    return service.ListModelInfosResponse(
        data=data,
        has_more=len(shown) < len(chosen),
        first_id=data[0].id if data else "",
        last_id=data[-1].id if data else "",
    )
