"""Token estimates for when an upstream reports no usage.

No tokenizer ships for every model, so the gateway estimates as OpenAI's guidance does:
about four bytes of UTF-8 text per token, plus a small per-message overhead for chat.
Upstream-reported counts always win over these.
"""

from __future__ import annotations

from server.core.generation import GenerationRequest

BYTES_PER_TOKEN = 4
# Role markers and separators a chat template adds around each message.
TOKENS_PER_MESSAGE = 4
# The assistant-turn primer after the last message.
REPLY_PRIMER_TOKENS = 3


def estimate(text: str) -> int:
    """Estimates the tokens of `text`; non-empty text is at least one token."""
    if not text:
        return 0
    return max(1, (len(text.encode()) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN)


def estimate_prompt(request: GenerationRequest) -> int:
    """Estimates the input tokens of a request, chat overhead included."""
    if request.prompt is not None:
        return estimate(request.prompt)
    body = sum(estimate(m.content) + TOKENS_PER_MESSAGE for m in request.messages)
    return body + REPLY_PRIMER_TOKENS
