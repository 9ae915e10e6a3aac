"""What the answers in OpenAI's shape share, on interface A's completions and on
interface B: the head every response and chunk of a call starts with, and a text choice.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.v1 import completion_pb2

from server.application.pipeline.engine import Run
from server.base.call import Call


def head(call: Call, run: Run, kind: str, **extra: Any) -> dict[str, Any]:
    """The fields every response and chunk of one call starts with."""
    prefix = "chatcmpl" if kind.startswith("chat.") else "cmpl"
    return dict(
        id=f"{prefix}-{call.request_id}",
        object=kind,
        created=int(time.time()),
        model=run.model.id,
        **extra,
    )


def text_choice(
    text: str, finish_reason: str | None = None, index: int = 0
) -> completion_pb2.CompletionChoice:
    return completion_pb2.CompletionChoice(index=index, text=text, finish_reason=finish_reason)
