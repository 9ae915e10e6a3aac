"""The Gemini API wire format: `models/{model}:generateContent`,
`:streamGenerateContent?alt=sse`, `:countTokens`, `:embedContent` and
`:batchEmbedContents` under /v1beta, JSON or SSE chunks.

Every request is checked as the Gemini API checks it (`refusal`): the key in
`x-goog-api-key` (none: 403 PERMISSION_DENIED; a wrong one: the 400 API_KEY_INVALID
Gemini answers), the model in the path, the request's fields as the API's
GenerateContentRequest has them (camelCase or snake_case, as proto JSON allows; an
unknown one is the 400 "Invalid JSON payload received. Unknown name ..."), their
types, roles and the one-data-field rule of parts. As Gemini 3 models do, the current
turn's function calls must carry back the thoughtSignature the fake gave them (or
Gemini's documented bypass value): missing is a 400, altered a 400 "Corrupted thought
signature". A prompt holding BLOCKED_PROMPT is blocked (promptFeedback); one holding
BLOCKED_REPLY gets a candidate cut for SAFETY with no content.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tests.support.lookalikes import GOOGLE_API_KEY
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
    one_of,
    strings,
)

MODEL = "gemini-fake"
EMBEDDER = "gemini-embedding-fake"
BLOCKED_PROMPT = "blocked-topic"
BLOCKED_REPLY = "unsafe-reply"
DIMENSIONS = 8
BYPASS = "skip_thought_signature_validator"
FINISH = {"stop": "STOP", "length": "MAX_TOKENS"}
# GenerateContentRequest's fields (the model comes in the path).
FIELDS = frozenset({"contents", "tools", "toolConfig", "safetySettings", "systemInstruction",
                    "generationConfig", "cachedContent"})  # fmt: skip
CONFIG = {
    "stopSequences": strings(5),
    "responseMimeType": one_of("text/plain", "application/json", "text/x.enum"),
    "responseSchema": OBJECT,
    "responseJsonSchema": OBJECT,
    "responseModalities": LIST,
    "candidateCount": integer(1, 8),
    "maxOutputTokens": integer(1),
    "temperature": number(0, 2),
    "topP": number(0, 1),
    "topK": integer(1),
    "seed": integer(),
    "presencePenalty": number(-2, 2, below=2),
    "frequencyPenalty": number(-2, 2, below=2),
    "responseLogprobs": BOOL,
    "logprobs": integer(0, 20),
    "thinkingConfig": OBJECT,
    "mediaResolution": STRING,
}
THINKING = {"includeThoughts": BOOL, "thinkingBudget": integer(-1),
            "thinkingLevel": one_of("minimal", "low", "medium", "high")}  # fmt: skip
PART_DATA = ("text", "inlineData", "fileData", "functionCall", "functionResponse",
             "executableCode", "codeExecutionResult")  # fmt: skip
PART_FIELDS = frozenset({*PART_DATA, "thought", "thoughtSignature", "videoMetadata"})
DECLARATION = frozenset({"name", "description", "parameters", "parametersJsonSchema",
                         "response", "responseJsonSchema", "behavior"})  # fmt: skip
EMBED_FIELDS = frozenset({"model", "content", "taskType", "title", "outputDimensionality"})


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def camels(value: Any) -> Any:
    """Proto JSON takes snake_case names too: the body as camelCase."""
    if isinstance(value, dict):
        return {camel(k): camels(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camels(v) for v in value]
    return value


def error(code: int, status: str, message: str, details: list[Any] | None = None) -> Any:
    body: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details:
        body["details"] = details
    return {"error": body}


def invalid(message: str) -> Refusal:
    return Refusal(400, error(400, "INVALID_ARGUMENT", message), message)


def unknown(name: str) -> Refusal:
    return invalid(f'Invalid JSON payload received. Unknown name "{name}": Cannot find field.')


@dataclass
class GeminiWire:
    # The key the fake expects; None: any or none.
    key: str | None = KEY
    # Gemini 3's rule: the current turn's calls carry their signatures back.
    strict_signatures: bool = True
    # Signatures given out, and those that came back on calls.
    issued: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    # The API version in the path (Vertex serves v1 and v1beta1).
    prefix: str = "/v1beta/models/"
    # Embeddings left out of a batch's answer, and a countTokens total sent instead of
    # the count (a broken upstream).
    embeddings_missing: int = 0
    total_tokens: Any = None
    # An error object streamed after two tokens, as Gemini ends a stream that fails.
    mid_stream_error: bool = False
    # The finishReason to answer instead of STOP or MAX_TOKENS (RECITATION, OTHER...).
    finish_reason: str | None = None

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        if self.key is not None:
            given = headers.get("x-goog-api-key")
            if given is None:
                message = "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."  # noqa: E501
                return Refusal(403, error(403, "PERMISSION_DENIED", message), "no key")
            if given != self.key:
                detail = {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                          "reason": "API_KEY_INVALID", "domain": "googleapis.com"}  # fmt: skip
                message = "API key not valid. Please pass a valid API key."
                return Refusal(400, error(400, "INVALID_ARGUMENT", message, [detail]), "bad key")
        return self.checked(path, camels(body))

    def checked(self, path: str, body: dict[str, Any]) -> Refusal | None:
        """The body's checks, past authentication (Vertex shares them)."""
        model, method = self.method(path)
        if method is None:
            return Refusal(404, error(404, "NOT_FOUND", f"Unknown path {path}"), "unknown path")
        if model not in (MODEL, EMBEDDER):
            message = f"models/{model} is not found for API version v1beta, or is not supported for {method}."  # noqa: E501
            return Refusal(404, error(404, "NOT_FOUND", message), "unknown model")
        if method in ("embedContent", "batchEmbedContents"):
            return self._embedding(method, model, body)
        if method == "countTokens":
            inner = body.get("generateContentRequest")
            if set(body) - {"contents", "generateContentRequest"}:
                return unknown(sorted(set(body) - {"contents", "generateContentRequest"})[0])
            if inner is None:
                return self._generation({"contents": body.get("contents")})
            if inner.get("model") != f"models/{model}":
                return invalid("generateContentRequest.model: must name the model of the path")
            body = {k: v for k, v in inner.items() if k != "model"}
        if method not in ("generateContent", "streamGenerateContent", "countTokens"):
            return Refusal(404, error(404, "NOT_FOUND", f"Unknown method {method}"), "method")
        return self._generation(body)

    def method(self, path: str) -> tuple[str, str | None]:
        url = urlsplit(path)
        if not url.path.startswith(self.prefix) or ":" not in url.path:
            return "", None
        model, _, method = url.path.removeprefix(self.prefix).partition(":")
        if method == "streamGenerateContent" and url.query != "alt=sse":
            return model, None  # the fake serves only the SSE form of streams
        return model, method

    def _generation(self, body: dict[str, Any]) -> Refusal | None:
        if extra := sorted(set(body) - FIELDS):
            return unknown(extra[0])
        if not body.get("contents"):
            return invalid("* GenerateContentRequest.contents: contents is not specified")
        checks: dict[str, Check] = {"contents": LIST, "tools": LIST, "toolConfig": OBJECT,
                                    "safetySettings": LIST, "systemInstruction": OBJECT,
                                    "generationConfig": OBJECT, "cachedContent": STRING}  # fmt: skip
        if (found := first_problem(body, checks, nullable=False)) is not None:
            return invalid(f"Invalid value at '{found[0]}': {found[1]}")
        config = body.get("generationConfig") or {}
        if extra := sorted(set(config) - set(CONFIG)):
            return unknown(f"generation_config.{extra[0]}")
        if (found := first_problem(config, CONFIG, nullable=False)) is not None:
            return invalid(f"Invalid value at 'generation_config.{found[0]}': {found[1]}")
        thinking = config.get("thinkingConfig") or {}
        if extra := sorted(set(thinking) - set(THINKING)):
            return unknown(f"generation_config.thinking_config.{extra[0]}")
        if (found := first_problem(thinking, THINKING, nullable=False)) is not None:
            return invalid(f"Invalid value at 'thinking_config.{found[0]}': {found[1]}")
        if "responseJsonSchema" in config and "responseSchema" in config:
            return invalid("responseSchema and responseJsonSchema cannot both be set")
        system = body.get("systemInstruction")
        if system is not None and (problem := _parts(system.get("parts"), "system_instruction")):
            return invalid(problem)
        for i, content in enumerate(body["contents"]):
            if content.get("role") not in ("user", "model"):
                return invalid(f"contents[{i}].role: Please use a valid role: user, model.")
            if problem := _parts(content.get("parts"), f"contents[{i}]"):
                return invalid(problem)
        if problem := _tools(body):
            return invalid(problem)
        if self.strict_signatures and (refused := self._signatures(body["contents"])):
            return refused
        return None

    def _signatures(self, contents: list[dict[str, Any]]) -> Refusal | None:
        """Gemini 3: the first call of each model step since the last user text carries
        the signature it was given (or the documented bypass)."""
        start = max((i for i, c in enumerate(contents) if c["role"] == "user" and any(
            "text" in p for p in c["parts"])), default=0)  # fmt: skip
        for i, content in enumerate(contents[start:], start):
            calls = [p for p in content["parts"] if "functionCall" in p]
            if content["role"] != "model" or not calls:
                continue
            signature = calls[0].get("thoughtSignature")
            if signature is None:
                name = calls[0]["functionCall"].get("name")
                return invalid(
                    f"Function call `{name}` in the `{i}. content block` is missing a "
                    "`thought_signature`."
                )
            if signature != BYPASS and signature not in self.issued:
                return invalid("Corrupted thought signature.")
            self.returned.append(signature)
        return None

    def _embedding(self, method: str, model: str, body: dict[str, Any]) -> Refusal | None:
        asks = body.get("requests") if method == "batchEmbedContents" else [body]
        if method == "batchEmbedContents" and set(body) - {"requests"}:
            return unknown(sorted(set(body) - {"requests"})[0])
        if not isinstance(asks, list) or not asks:
            return invalid("* BatchEmbedContentsRequest.requests: is empty")
        for i, ask in enumerate(asks):
            if extra := sorted(set(ask) - EMBED_FIELDS):
                return unknown(extra[0])
            if method == "batchEmbedContents" and ask.get("model") != f"models/{model}":
                return invalid(
                    f"* BatchEmbedContentsRequest.requests[{i}].model: the model must be the "
                    "same as the model of the batch request"
                )
            if problem := _parts((ask.get("content") or {}).get("parts"), f"requests[{i}]"):
                return invalid(problem)
            dims = ask.get("outputDimensionality")
            if dims is not None and (integer(1, 3072)(dims)):
                return invalid(f"requests[{i}].output_dimensionality: out of range")
        return None

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return self.method(path)[1] == "streamGenerateContent"

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return camels(body).get("generationConfig", {}).get("maxOutputTokens")

    def usage(self, reply: Reply, output: int) -> dict[str, Any]:
        u = reply.usage
        usage = {
            "promptTokenCount": u.prompt_tokens,
            "candidatesTokenCount": output,
            "totalTokenCount": u.prompt_tokens + output + u.reasoning_tokens,
        }
        if u.cached_tokens:
            usage["cachedContentTokenCount"] = u.cached_tokens
        if u.reasoning_tokens:
            usage["thoughtsTokenCount"] = u.reasoning_tokens
        return usage

    def _call(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The function call the model makes now: the forced or first declared one,
        unless the conversation ends with function responses or calling is off."""
        declared = [d for t in body.get("tools") or () for d in t.get("functionDeclarations") or ()]
        calling = (body.get("toolConfig") or {}).get("functionCallingConfig") or {}
        last = (body.get("contents") or [{}])[-1]
        if not declared or calling.get("mode") == "NONE":
            return None
        if any("functionResponse" in p for p in last.get("parts") or ()):
            return None
        name = (calling.get("allowedFunctionNames") or [declared[0]["name"]])[0]
        signature = f"c2lnLWZha2Ut{len(self.issued)}"  # base64-looking, as Gemini's are
        self.issued.append(signature)
        return {"functionCall": {"name": name, "args": shapes.ARGUMENTS},
                "thoughtSignature": signature}  # fmt: skip

    def _blocked(self, body: dict[str, Any]) -> dict[str, Any] | None:
        if BLOCKED_PROMPT in json.dumps(body.get("contents")):
            return {"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": []},
                    "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}}  # fmt: skip
        return None

    def _candidate(self, parts: list[Any], finish: str | None, index: int = 0) -> Any:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": index}
        if finish is not None:
            candidate["finishReason"] = finish
        return candidate

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        body = camels(body)
        model, method = self.method(path)
        if method == "countTokens":
            total = counted(body.get("generateContentRequest") or body)
            return {}, {"totalTokens": total if self.total_tokens is None else self.total_tokens}
        if method == "embedContent":
            return {}, {"embedding": {"values": _vector(body)}}
        if method == "batchEmbedContents":
            asks = body["requests"][: len(body["requests"]) - self.embeddings_missing]
            return {}, {"embeddings": [{"values": _vector(ask)} for ask in asks]}
        if (blocked := self._blocked(body)) is not None:
            return {}, blocked
        answer = {"usageMetadata": self.usage(reply, len(reply.tokens)),
                  "modelVersion": model, "responseId": "resp-fake"}  # fmt: skip
        if BLOCKED_REPLY in json.dumps(body["contents"]):
            answer["candidates"] = [{"finishReason": "SAFETY", "index": 0}]
            return {}, answer
        count = (body.get("generationConfig") or {}).get("candidateCount", 1)
        candidates = []
        for index in range(count):
            parts: list[Any] = [*_thoughts(body), {"text": "".join(reply.tokens)}]
            call = self._call(body)
            if call is not None:
                parts = [*_thoughts(body), call]
            candidates.append(self._candidate(parts, self._finish(reply), index))
        answer["candidates"] = candidates
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        body = camels(body)
        if (blocked := self._blocked(body)) is not None:
            return [sse(blocked)], [], []
        usage = self.usage(reply, 0)
        if BLOCKED_REPLY in json.dumps(body["contents"]):
            cut = {"candidates": [{"finishReason": "SAFETY", "index": 0}], "usageMetadata": usage}
            return [sse(cut)], [], []
        count = range((body.get("generationConfig") or {}).get("candidateCount", 1))
        thoughts = [self._candidate(_thoughts(body), None, i) for i in count]
        before = [sse({"candidates": thoughts, "usageMetadata": usage})] if _thoughts(body) else []
        per_token = [
            sse({"candidates": [self._candidate([{"text": t}], None, i) for i in count],
                 "usageMetadata": usage})
            for t in reply.tokens
        ]  # fmt: skip
        if self.mid_stream_error:
            said = f"An internal error has occurred, key {GOOGLE_API_KEY}"
            failure = error(500, "INTERNAL", said)
            return before, [*per_token[:2], sse(failure)], []
        call = self._call(body)
        parts = [call] if call is not None else [{"text": ""}]
        last = {"candidates": [self._candidate(parts, self._finish(reply), i) for i in count],
                "usageMetadata": self.usage(reply, len(reply.tokens)), "modelVersion": MODEL}  # fmt: skip
        return before, per_token, [sse(last)]

    def _finish(self, reply: Reply) -> str:
        return self.finish_reason or FINISH[reply.finish]

    def error(self, status: int) -> Any:
        kind = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}  # fmt: skip
        details = None
        if status == 429:
            details = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"}]
        return error(status, kind.get(status, "UNKNOWN"), f"fake upstream {status}", details)


def _thoughts(body: dict[str, Any]) -> list[Any]:
    thinking = (body.get("generationConfig") or {}).get("thinkingConfig") or {}
    return (
        [{"text": "Thinking it over.", "thought": True}] if thinking.get("includeThoughts") else []
    )


def _vector(ask: dict[str, Any]) -> list[float]:
    text = "".join(p.get("text", "") for p in ask["content"]["parts"])
    size = ask.get("outputDimensionality") or DIMENSIONS
    return [round((len(text) + i) / 100, 4) for i in range(size)]


def _parts(parts: Any, where: str) -> str | None:
    if not isinstance(parts, list) or not parts:
        return f"{where}.parts: must not be empty"
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            return f"{where}.parts[{j}]: expected an object"
        if extra := sorted(set(part) - PART_FIELDS):
            return f"Invalid JSON payload received. Unknown name \"{extra[0]}\" at '{where}.parts[{j}]'"  # noqa: E501
        data = [k for k in PART_DATA if k in part]
        if len(data) != 1:
            return f"{where}.parts[{j}]: a part holds exactly one kind of data, not {data}"
        kind = data[0]
        value = part[kind]
        if kind == "text" and not isinstance(value, str):
            return f"{where}.parts[{j}].text: expected a string"
        if kind == "inlineData" and not (
            isinstance(value.get("mimeType"), str) and re.fullmatch(r"[A-Za-z0-9+/=]*", value.get("data", "-"))
        ):  # fmt: skip
            return f"{where}.parts[{j}].inline_data: needs a mime type and base64 data"
        if kind == "fileData" and not str(value.get("fileUri", "")).startswith(
            ("https://", "gs://")
        ):
            return f"{where}.parts[{j}].file_data.file_uri: must be a URI"
        if kind == "functionCall" and (
            not value.get("name") or not isinstance(value.get("args", {}), dict)
        ):
            return f"{where}.parts[{j}].function_call: needs a name and object args"
        if kind == "functionResponse" and (
            not value.get("name") or not isinstance(value.get("response"), dict)
        ):  # fmt: skip
            return f"{where}.parts[{j}].function_response: needs a name and an object response"
    return None


def counted(body: dict[str, Any]) -> int:
    """The fake's token count of a request: the words of its texts, system included."""
    contents = [*(body.get("contents") or ()), body.get("systemInstruction") or {}]
    return sum(len(str(p.get("text", "")).split()) for c in contents for p in c.get("parts") or ())


def _tools(body: dict[str, Any]) -> str | None:
    names: set[str] = set()
    for i, tool in enumerate(body.get("tools") or ()):
        for j, declaration in enumerate(tool.get("functionDeclarations") or ()):
            if extra := sorted(set(declaration) - DECLARATION):
                return f"Invalid JSON payload received. Unknown name \"{extra[0]}\" at 'tools[{i}].function_declarations[{j}]'"  # noqa: E501
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}", declaration.get("name", "")):
                return f"tools[{i}].function_declarations[{j}].name: invalid function name"
            if "parameters" in declaration and "parametersJsonSchema" in declaration:
                return "parameters and parametersJsonSchema cannot both be set"
            names.add(declaration["name"])
    calling = (body.get("toolConfig") or {}).get("functionCallingConfig")
    if calling is not None:
        if calling.get("mode") not in ("AUTO", "ANY", "NONE", "VALIDATED", None):
            return "tool_config.function_calling_config.mode: invalid value"
        allowed = calling.get("allowedFunctionNames")
        if allowed is not None and calling.get("mode") not in ("ANY", "VALIDATED"):
            return "allowed_function_names may be set only when the mode is ANY"
        if allowed is not None and set(allowed) - names:
            return "allowed_function_names names a function that is not declared"
    return None
