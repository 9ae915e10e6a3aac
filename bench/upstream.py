"""A minimal OpenAI-compatible upstream that answers instantly, for measuring overhead.

Run: python -m bench.upstream PORT
"""

from __future__ import annotations

import json
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

WORDS = ["Hello", " from", " the", " benchmark", " upstream", "."] * 4


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 12, "completion_tokens": len(WORDS), "total_tokens": 12 + len(WORDS)}


async def chat(request: Request) -> JSONResponse | StreamingResponse:
    body = await request.json()
    head = {"id": "chatcmpl-bench", "created": 1767225600, "model": body["model"]}
    if not body.get("stream"):
        message = {"role": "assistant", "content": "".join(WORDS)}
        return JSONResponse(
            {**head, "object": "chat.completion", "usage": _usage(),
             "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        )  # fmt: skip

    async def events():  # type: ignore[no-untyped-def]
        chunk = {**head, "object": "chat.completion.chunk"}
        for word in WORDS:
            choice = {"index": 0, "delta": {"content": word}, "finish_reason": None}
            yield f"data: {json.dumps({**chunk, 'choices': [choice]})}\n\n"
        last = {"index": 0, "delta": {}, "finish_reason": "stop"}
        yield f"data: {json.dumps({**chunk, 'choices': [last]})}\n\n"
        yield f"data: {json.dumps({**chunk, 'choices': [], 'usage': _usage()})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
