"""The Hugging Face TGI native wire format: /generate and /generate_stream.

Every request is checked as TGI's router checks it (`refusal`): with an API key set
(`--api-key`), `Authorization: Bearer <key>` or a 401 with an empty body; the body as
router/src/lib.rs's `GenerateRequest` (`inputs`, `parameters`) and `GenerateParameters`
deserialize it (a mistyped field: axum's 422 with its text); then validation.rs's
ranges (422 with `{"error", "error_type": "validation"}` and its messages).

One difference, on purpose: serde ignores a field the structs do not have, so TGI
silently drops an unknown field; this fake refuses it with a 422 instead, since a field
TGI drops is a field the gateway meant to send and lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.support.upstreams.base import Reply, sse
from tests.support.upstreams.checks import (
    BOOL,
    KEY,
    OBJECT,
    STRING,
    Check,
    Refusal,
    first_problem,
    integer,
    number,
    strings,
)

FINISH = {"stop": "eos_token", "length": "length"}
REQUEST_FIELDS = frozenset({"inputs", "parameters"})
# GenerateParameters' fields and serde types (u32, f32, bool...).
PARAMETERS: dict[str, Check] = {
    "best_of": integer(0),
    "temperature": number(),
    "repetition_penalty": number(),
    "frequency_penalty": number(),
    "top_k": integer(),
    "top_p": number(),
    "typical_p": number(),
    "do_sample": BOOL,
    "max_new_tokens": integer(0),
    "return_full_text": BOOL,
    "stop": strings(),
    "truncate": integer(0),
    "watermark": BOOL,
    "details": BOOL,
    "decoder_input_details": BOOL,
    "seed": integer(0),
    "top_n_tokens": integer(0),
    "grammar": OBJECT,
    "adapter_id": STRING,
}
# The router's default --max-stop-sequences.
MAX_STOP_SEQUENCES = 4


def undeserializable(message: str) -> Refusal:
    text = f"Failed to deserialize the JSON body into the target type: {message}"
    return Refusal(422, text, message, text=True)


def invalid(message: str) -> Refusal:
    return Refusal(422, {"error": message, "error_type": "validation"}, message)


def validation(parameters: dict[str, Any], stream: bool) -> str | None:
    """validation.rs's checks, in its order, with its messages."""
    p = parameters
    if p.get("temperature") is not None and p["temperature"] <= 0:
        return "`temperature` must be strictly positive"
    if p.get("repetition_penalty") is not None and p["repetition_penalty"] <= 0:
        return "`repetition_penalty` must be strictly positive"
    if p.get("frequency_penalty") is not None and not -2 <= p["frequency_penalty"] <= 2:
        return "`frequency_penalty` must be >= -2.0 and <= 2.0"
    if p.get("top_p") is not None and not 0 < p["top_p"] < 1:
        return "`top_p` must be > 0.0 and < 1.0"
    if p.get("typical_p") is not None and not 0 < p["typical_p"] < 1:
        return "`typical_p` must be > 0.0 and < 1.0"
    if p.get("top_k") is not None and p["top_k"] <= 0:
        return "`top_k` must be strictly positive"
    if p.get("max_new_tokens") is not None and p["max_new_tokens"] <= 0:
        return "`max_new_tokens` must be strictly positive"
    if len(p.get("stop") or []) > MAX_STOP_SEQUENCES:
        return f"`stop` supports up to {MAX_STOP_SEQUENCES} stop sequences. Given: {len(p['stop'])}"
    if (p.get("best_of") or 1) > 1 and stream:
        return "`best_of` != 1 is not supported when streaming tokens"
    if p.get("decoder_input_details") and stream:
        return "`decoder_input_details` == true is not supported when streaming tokens"
    return None


@dataclass
class TgiWire:
    # The router's --api-key; None: TGI started without one (the default).
    key: str | None = KEY

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        if path not in ("/generate", "/generate_stream"):
            return Refusal(404, "", f"unknown path {path}", text=True)  # axum's empty 404
        if self.key is not None:
            given = headers.get("authorization", "")
            if given.lower() != f"bearer {self.key}".lower():
                return Refusal(401, "", "no Bearer key", text=True)
        if extra := sorted(set(body) - REQUEST_FIELDS):
            return undeserializable(f"unknown field `{extra[0]}` (TGI would drop it)")
        if not isinstance(body.get("inputs"), str):
            return undeserializable("inputs: invalid type, expected a string")
        parameters = body.get("parameters", {})
        if not isinstance(parameters, dict):
            return undeserializable("parameters: invalid type, expected struct GenerateParameters")
        if extra := sorted(set(parameters) - set(PARAMETERS)):
            return undeserializable(f"parameters: unknown field `{extra[0]}` (TGI would drop it)")
        if (found := first_problem(parameters, PARAMETERS, nullable=True)) is not None:
            name, problem = found
            return undeserializable(f"parameters.{name}: invalid type: {problem}")
        if not body["inputs"]:
            return invalid("`inputs` cannot be empty")
        problem = validation(parameters, stream=path == "/generate_stream")
        return None if problem is None else invalid(problem)

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return path == "/generate_stream"

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return (body.get("parameters") or {}).get("max_new_tokens")

    def token(self, i: int, text: str) -> dict[str, Any]:
        return {"id": 1000 + i, "text": text, "logprob": -0.25, "special": False}

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        answer = {
            "generated_text": "".join(reply.tokens),
            "details": {
                "finish_reason": FINISH[reply.finish],
                "generated_tokens": len(reply.tokens),
                "seed": None,
                "prefill": [],
                "tokens": [self.token(i, t) for i, t in enumerate(reply.tokens)],
            },
        }
        headers = {
            "x-prompt-tokens": str(reply.usage.prompt_tokens),
            "x-generated-tokens": str(len(reply.tokens)),
        }
        return headers, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        per_token = [
            sse(
                {
                    "index": i + 1,
                    "token": self.token(i, t),
                    "top_tokens": None,
                    "generated_text": None,
                    "details": None,
                }
            )  # fmt: skip
            for i, t in enumerate(reply.tokens)
        ]
        # The final event carries an end-of-sequence token plus the whole text.
        n = len(reply.tokens)
        final = {
            "index": n + 1,
            "token": {"id": 2, "text": "</s>", "logprob": -0.01, "special": True},
            "top_tokens": None,
            "generated_text": "".join(reply.tokens),
            "details": {
                "finish_reason": FINISH[reply.finish],
                "generated_tokens": n,
                "seed": None,
                "input_length": reply.usage.prompt_tokens,
            },
        }
        return [], per_token, [sse(final)]

    def error(self, status: int) -> Any:
        kind = {422: "validation", 429: "overloaded"}.get(status, "generation")
        return {"error": f"fake upstream error {status}", "error_type": kind}
