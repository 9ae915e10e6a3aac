"""The OpenAI wire format: /v1/chat/completions and /v1/completions, JSON or SSE, and
/v1/embeddings.

Every request is checked as OpenAI's API checks it (`refusal`): the key as
`Authorization: Bearer`, the request's top-level fields against the installed openai
SDK's parameter types (an unknown one is the 400 "Unrecognized request argument
supplied"), each field's type and range, and the shapes of messages, tools,
tool_choice and response_format (shapes.py). A refused request gets OpenAI's status and
error body, and is kept in `refused`.
"""

from __future__ import annotations

import base64
import json
import struct
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from openai.types import completion_create_params as completion_params
from openai.types import embedding_create_params
from openai.types.chat import completion_create_params as chat_params

from tests.support.upstreams import shapes
from tests.support.upstreams.base import Reply, sse
from tests.support.upstreams.checks import (
    BOOL,
    KEY,
    LIST,
    OBJECT,
    STRING,
    Check,
    Refusal,
    first_problem,
    integer,
    number,
    of_type,
    one_of,
    str_map,
    strings,
)

CREATED = 1767225600
# The fields each endpoint takes, as the SDK's request types name them.
CHAT_FIELDS = frozenset(chat_params.CompletionCreateParamsStreaming.__annotations__)
COMPLETION_FIELDS = frozenset(completion_params.CompletionCreateParamsStreaming.__annotations__)
EMBEDDING_FIELDS = frozenset(embedding_create_params.EmbeddingCreateParams.__annotations__)
# Dimensions of the fake's vectors when the request does not shorten them.
EMBEDDING_SIZE = 8

# Types and ranges of the sampling and control fields (the API reference's).
COMMON: dict[str, Check] = {
    "model": STRING,
    "temperature": number(0, 2),
    "top_p": number(0, 1),
    "max_tokens": integer(1),
    "n": integer(1, 128),
    "stop": strings(4, single=True),
    "seed": integer(),
    "presence_penalty": number(-2, 2),
    "frequency_penalty": number(-2, 2),
    "logit_bias": str_map(integer(-100, 100)),
    "user": STRING,
    "stream": BOOL,
    "stream_options": OBJECT,
}
CHAT_CHECKS: dict[str, Check] = {
    **COMMON,
    "messages": LIST,
    "max_completion_tokens": integer(1),
    "logprobs": BOOL,
    "top_logprobs": integer(0, 20),
    "tools": LIST,
    "tool_choice": of_type(str, dict, word="a string or an object"),
    "parallel_tool_calls": BOOL,
    "response_format": OBJECT,
    "reasoning_effort": one_of("none", "minimal", "low", "medium", "high", "xhigh"),
    "metadata": str_map(STRING),
    "store": BOOL,
}
COMPLETION_CHECKS: dict[str, Check] = {
    **COMMON,
    "prompt": of_type(str, list, word="a string or an array"),
    "logprobs": integer(0, 5),
    "echo": BOOL,
    "suffix": STRING,
    "best_of": integer(1, 20),
}


def error_body(message: str, param: str | None = None, code: str | None = None) -> Any:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param,
                  "code": code}
    }  # fmt: skip


def bad_request(message: str, param: str | None = None, code: str | None = None) -> Refusal:
    return Refusal(400, error_body(message, param, code), message)


def credential_refusal(headers: dict[str, str], key: str | None) -> Refusal | None:
    """OpenAI's 401s: no `Authorization: Bearer` at all, or another key."""
    if key is None:
        return None
    given = headers.get("authorization")
    if given is None or not given.startswith("Bearer "):
        message = (
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
        )
        return Refusal(401, error_body(message), "no Bearer key")
    if given != f"Bearer {key}":
        message = "Incorrect API key provided. You can find your API key in your account."
        return Refusal(401, error_body(message, code="invalid_api_key"), "wrong key")
    return None


OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/embeddings"})


def unknown_path(path: str, served: frozenset[str]) -> Refusal | None:
    """OpenAI's 404 for a path it does not serve."""
    if urlsplit(path).path in served:
        return None
    message = f"Invalid URL (POST {urlsplit(path).path})"
    return Refusal(404, error_body(message), message)


def generation_refusal(path: str, body: dict[str, Any]) -> Refusal | None:
    """What OpenAI refuses in a chat or text completion request body."""
    chat = path.endswith("/chat/completions")
    fields, checks = (CHAT_FIELDS, CHAT_CHECKS) if chat else (COMPLETION_FIELDS, COMPLETION_CHECKS)
    if extra := sorted(set(body) - fields):
        return bad_request(f"Unrecognized request argument supplied: {', '.join(extra)}")
    for required in ("model", "messages" if chat else "prompt"):
        if required not in body:
            return bad_request(f"Missing required parameter: '{required}'.", required,
                               "missing_required_parameter")  # fmt: skip
    if (found := first_problem(body, checks, nullable=True)) is not None:
        name, problem = found
        return bad_request(f"Invalid value for '{name}': {problem}.", name, "invalid_value")
    if body.get("stream_options") is not None and not body.get("stream"):
        return bad_request(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        )
    if chat and not body["messages"]:
        return bad_request("Invalid 'messages': empty array.", "messages", "empty_array")
    if chat and "parallel_tool_calls" in body and not body.get("tools"):
        return bad_request(
            "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only "
            "allowed when 'tools' are specified.",
            "parallel_tool_calls",
        )
    if chat and body.get("top_logprobs") is not None and not body.get("logprobs"):
        return bad_request("'logprobs' must be set to true when 'top_logprobs' is given.",
                           "top_logprobs")  # fmt: skip
    if chat and (problems := shapes.openai_chat(body)):
        return bad_request("; ".join(problems))
    return None


def embedding_problem(body: dict[str, Any]) -> str | None:
    """What OpenAI would refuse in an /embeddings request body, or None."""
    if extra := set(body) - EMBEDDING_FIELDS:
        return f"Unrecognized request argument supplied: {', '.join(sorted(extra))}"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: required string"
    value = body.get("input")
    if isinstance(value, str):
        ok = bool(value)
    elif isinstance(value, list) and 0 < len(value) <= 2048:
        ok = (
            all(isinstance(x, str) and x for x in value)
            or all(_is_token(x) for x in value)
            or all(isinstance(x, list) and x and all(_is_token(t) for t in x) for x in value)
        )
    else:
        ok = False
    if not ok:
        return "input: a non-empty string, strings, token ids or token-id arrays"
    if body.get("encoding_format", "float") not in ("float", "base64"):
        return "encoding_format: float or base64"
    dims = body.get("dimensions")
    if dims is not None and (not _is_token(dims) or dims < 1):
        return "dimensions: a positive integer"
    if not isinstance(body.get("user", ""), str):
        return "user: a string"
    return None


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def token_logprob(i: int) -> float:
    """The fake's log probability of its i-th token; alternatives are a nat less likely each."""
    return -0.25 * (i + 1)


def chat_logprobs(body: dict[str, Any], tokens: list[str], first: int = 0) -> Any:
    """A chat choice's `logprobs` as OpenAI writes them (ChoiceLogprobs), or None."""
    if not body.get("logprobs"):
        return None

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    content = []
    for i, t in enumerate(tokens, first):
        alternatives = [entry(f"alt{j}", token_logprob(i) - 1 - j)
                        for j in range((body.get("top_logprobs") or 0) - 1)]  # fmt: skip
        top = [entry(t, token_logprob(i)), *alternatives] if body.get("top_logprobs") else []
        content.append({**entry(t, token_logprob(i)), "top_logprobs": top})
    return {"content": content, "refusal": None}


def completion_logprobs(body: dict[str, Any], tokens: list[str], first: int = 0) -> Any:
    """A text completion choice's legacy `logprobs`, or None: `logprobs` alternatives
    per token (0: the tokens' own log probabilities only)."""
    n = body.get("logprobs")
    if n is None:
        return None
    offsets = [sum(len(t) for t in tokens[:k]) for k in range(len(tokens))]
    return {
        "tokens": tokens,
        "token_logprobs": [token_logprob(i) for i, _ in enumerate(tokens, first)],
        "top_logprobs": [
            {t: token_logprob(i), **{f"alt{j}": token_logprob(i) - 1 - j for j in range(n - 1)}}
            if n
            else {}
            for i, t in enumerate(tokens, first)
        ],
        "text_offset": offsets,
    }


def fake_vector(index: int, size: int) -> list[float]:
    """A recognisable vector: input i's values are i + k/10."""
    return [index + k / 10 for k in range(size)]


@dataclass
class OpenAIWire:
    # The key the fake expects as `Authorization: Bearer`; None: any or none (as an
    # OpenAI-compatible server run without one, such as vLLM or Ollama).
    key: str | None = KEY
    # Request bodies refused as OpenAI would refuse them.
    refused: list[dict[str, Any]] = field(default_factory=list)

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        refused = credential_refusal(headers, self.key) or unknown_path(path, OPENAI_PATHS)
        if refused is None:
            if path.endswith("/embeddings"):
                problem = embedding_problem(body)
                refused = None if problem is None else bad_request(problem)
            else:
                refused = generation_refusal(path, body)
        if refused is not None:
            self.refused.append(body)
        return refused

    def embeddings(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        inputs = body["input"]
        count = len(inputs) if isinstance(inputs, list) and not _is_token(inputs[0]) else 1
        size = body.get("dimensions") or EMBEDDING_SIZE
        data = []
        for i in range(count):
            vector: Any = fake_vector(i, size)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(struct.pack(f"<{size}f", *vector)).decode()
            data.append({"object": "embedding", "index": i, "embedding": vector})
        prompt = reply.usage.prompt_tokens
        usage = {"prompt_tokens": prompt, "total_tokens": prompt}
        return {"object": "list", "data": data, "model": body["model"], "usage": usage}

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return bool(body.get("stream"))

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return body.get("max_completion_tokens") or body.get("max_tokens")

    def usage(self, reply: Reply) -> dict[str, Any]:
        u = reply.usage
        completion = len(reply.tokens) + u.reasoning_tokens
        return {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": u.prompt_tokens + completion,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        }

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        if path.endswith("/embeddings"):
            return {}, self.embeddings(body, reply)
        text = "".join(reply.tokens)
        tool = shapes.tool_to_call(body, anthropic=False)
        if path.endswith("/chat/completions") and tool is not None:
            call = {
                "id": "call_fake",
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(shapes.ARGUMENTS)},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            choice = {"index": 0, "message": message, "logprobs": None,
                      "finish_reason": "tool_calls"}  # fmt: skip
            kind = "chat.completion"
        elif path.endswith("/chat/completions"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": chat_logprobs(body, reply.tokens),
                "finish_reason": reply.finish,
            }
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "finish_reason": reply.finish,
                      "logprobs": completion_logprobs(body, reply.tokens)}  # fmt: skip
            kind = "text_completion"
        answer = {
            "id": "cmpl-fake",
            "object": kind,
            "created": CREATED,
            "model": body.get("model"),
            "choices": [choice],
            "usage": self.usage(reply),
        }
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        chat = path.endswith("/chat/completions")
        head = {
            "id": "chatcmpl-fake" if chat else "cmpl-fake",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": CREATED,
            "model": body.get("model"),
        }
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta_or_text: Any, finish: str | None = None, logprobs: Any = None) -> bytes:
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": logprobs}
            if chat:
                choice["delta"] = delta_or_text
            else:
                choice["text"] = delta_or_text
            data: dict[str, Any] = {**head, "choices": [choice]}
            if include_usage:
                data["usage"] = None
            return sse(data)

        before = [chunk({"role": "assistant", "content": ""})] if chat else []
        logprobs = chat_logprobs if chat else completion_logprobs
        per_token = [chunk({"content": t} if chat else t, None, logprobs(body, [t], i))
                     for i, t in enumerate(reply.tokens)]  # fmt: skip
        after = [chunk({} if chat else "", reply.finish)]
        tool = shapes.tool_to_call(body, anthropic=False) if chat else None
        if tool is not None:
            # OpenAI's framing: id, type and name first, then argument fragments.
            head_call = {"index": 0, "id": "call_fake", "type": "function",
                         "function": {"name": tool, "arguments": ""}}  # fmt: skip
            per_token = [chunk({"tool_calls": [head_call]})] + [
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]})
                for f in shapes.ARGUMENT_FRAGMENTS
            ]
            after = [chunk({}, "tool_calls")]
        if include_usage:
            after.append(sse({**head, "choices": [], "usage": self.usage(reply)}))
        after.append(b"data: [DONE]\n\n")
        return before, per_token, after

    def error(self, status: int) -> Any:
        kind = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(status, "server_error")
        return {
            "error": {
                "message": f"fake upstream error {status}",
                "type": "invalid_request_error" if status < 500 else "server_error",
                "param": None,
                "code": kind,
            }
        }
