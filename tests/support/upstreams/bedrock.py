"""Amazon Bedrock's runtime wire: POST /model/{modelId}/converse, /converse-stream
(answered in the AWS event-stream binary framing) and /invoke (Titan embeddings).

Every request is checked as Bedrock checks it (`refusal`): the SigV4 signature,
recomputed here from the request as received (the canonical request, the string to
sign and the derived key, written from AWS's specification with hashlib and hmac,
not botocore), its date, region, service and access key, and the session token when
the credentials have one; or a Bedrock API key as `Authorization: Bearer`. Then the
Converse request's fields as the service model (botocore's bedrock-runtime
service-2.json) has them: an unknown one is Bedrock's ValidationException naming it.
A prompt holding GUARDED is stopped by the guardrail (stopReason guardrail_intervened).
With extended thinking asked (`additionalModelRequestFields.thinking`), the answer
starts with a `reasoningContent` block: REASONING, then its SIGNATURE (always, with
`always_reasons`, as models that reason by default answer). Reasoning given back must
be that, unchanged; with thinking on, a conversation that ends in tool results must
give it back at the start of the turn that made the calls (Anthropic's models' rule).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import struct
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from tests.support.lookalikes import AWS_ACCESS_KEY, AWS_SECRET_KEY
from tests.support.upstreams import shapes
from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import Refusal

MODEL = "anthropic.claude-fake-v1:0"
EMBEDDER = "amazon.titan-embed-text-v2:0"
REGION = "us-west-2"
ACCESS_KEY, SECRET = AWS_ACCESS_KEY, AWS_SECRET_KEY
GUARDED = "guarded-topic"
# The variables the gateway's test configs read the fake's credentials from; gateway
# processes started by tests inherit them.
ACCESS_KEY_ENV, SECRET_ENV = "GATEWAY_TEST_AWS_ACCESS_KEY_ID", "GATEWAY_TEST_AWS_SECRET_ACCESS_KEY"
os.environ.setdefault(ACCESS_KEY_ENV, ACCESS_KEY)
os.environ.setdefault(SECRET_ENV, SECRET)
STOP = {"stop": "end_turn", "length": "max_tokens"}
REASONING, SIGNATURE = ("Thinking", " briefly."), "sig-bedrock-0"
FIELDS = frozenset({"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
                    "additionalModelRequestFields", "promptVariables",
                    "additionalModelResponseFieldPaths", "requestMetadata", "performanceConfig",
                    "promptCaching", "serviceTier"})  # fmt: skip
INFERENCE = frozenset({"maxTokens", "temperature", "topP", "stopSequences"})
BLOCKS = frozenset({"text", "image", "document", "video", "toolUse", "toolResult",
                    "guardContent", "cachePoint", "reasoningContent", "citationsContent"})  # fmt: skip


def error(kind: str, message: str, status: int) -> Refusal:
    return Refusal(status, {"message": message}, kind,
                   headers={"x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/coral/"})  # fmt: skip


def invalid(message: str) -> Refusal:
    return error("ValidationException", message, 400)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


@dataclass
class BedrockWire:
    access_key: str = ACCESS_KEY
    secret: str = SECRET
    session_token: str | None = None
    api_key: str | None = None
    stream_content_type: str = "application/vnd.amazon.eventstream"
    # Signatures checked and found right.
    verified: list[str] = field(default_factory=list)
    # An error answer for requests past the signature check, and an exception event
    # that ends streams after two tokens.
    fail_with: Refusal | None = None
    mid_stream: str | None = None
    always_reasons: bool = False

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        refused = self._signature(path, headers) or self.fail_with
        if refused is not None:
            return refused
        url = urlsplit(path).path
        parts = url.split("/")
        if len(parts) != 4 or parts[1] != "model":
            return error("UnknownOperationException", "Unknown operation", 404)
        model, method = unquote(parts[2]), parts[3]
        if method == "invoke":
            if model != EMBEDDER:
                return error("ResourceNotFoundException", "Model not found", 404)
            if set(body) - {"inputText", "dimensions", "normalize", "embeddingTypes"}:
                return invalid(
                    f"extraneous key [{sorted(set(body) - {'inputText'})[0]}] is not permitted"
                )  # noqa: E501
            return None
        if method not in ("converse", "converse-stream"):
            return error("UnknownOperationException", "Unknown operation", 404)
        if model != MODEL:
            return error(
                "ResourceNotFoundException", "The provided model identifier is invalid.", 400
            )  # noqa: E501
        return self._converse(body)

    def _signature(self, path: str, headers: dict[str, str]) -> Refusal | None:
        auth = headers.get("authorization", "")
        if self.api_key is not None and auth == f"Bearer {self.api_key}":
            return None
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return error(
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
                403,
            )  # noqa: E501
        fields = dict(
            p.strip().split("=", 1) for p in auth.removeprefix("AWS4-HMAC-SHA256 ").split(",")
        )
        key, day, region, service, terminal = fields["Credential"].split("/")
        if key != self.access_key:
            return error(
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
                403,
            )  # noqa: E501
        if (region, service, terminal) != (REGION, "bedrock", "aws4_request"):
            return error(
                "InvalidSignatureException",
                f"Credential should be scoped to a valid region and service 'bedrock', not '{region}/{service}'.",
                403,
            )  # noqa: E501
        stamp = headers.get("x-amz-date", "")
        when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
        if abs(when - time.time()) > 300 or not stamp.startswith(day):
            return error("InvalidSignatureException", "Signature expired", 403)
        if (
            self.session_token is not None
            and headers.get("x-amz-security-token") != self.session_token
        ):  # noqa: E501
            return error(
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
                403,
            )  # noqa: E501
        signed = fields["SignedHeaders"].split(";")
        if "host" not in signed or (
            "x-amz-security-token" in headers and "x-amz-security-token" not in signed
        ):  # noqa: E501
            return error(
                "InvalidSignatureException", "Host and the security token must be signed.", 403
            )  # noqa: E501
        url = urlsplit(path)
        # AWS's canonical URI for services other than S3: each segment of the path as
        # received, URI-encoded again.
        canonical_uri = "/".join(quote(s, safe="-_.~") for s in url.path.split("/"))
        query = "&".join(sorted(url.query.split("&"))) if url.query else ""
        canonical_headers = "".join(f"{h}:{' '.join(headers[h].split())}\n" for h in signed)
        request = "\n".join([
            "POST", canonical_uri, query, canonical_headers, ";".join(signed),
            headers[":body-sha256"],
        ])  # fmt: skip
        scope = f"{day}/{region}/{service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                             hashlib.sha256(request.encode()).hexdigest()])  # fmt: skip
        signing = _hmac(_hmac(_hmac(_hmac(f"AWS4{self.secret}".encode(), day), region), service),
                        "aws4_request")  # fmt: skip
        expected = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, fields["Signature"]):
            message = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."  # noqa: E501
            return error("InvalidSignatureException", message, 403)
        self.verified.append(expected)
        return None

    def _converse(self, body: dict[str, Any]) -> Refusal | None:
        if extra := sorted(set(body) - FIELDS):
            return invalid(f"extraneous key [{extra[0]}] is not permitted")
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return invalid(
                "1 validation error detected: Value null at 'messages' failed to satisfy constraint: Member must not be null"
            )  # noqa: E501
        if extra := sorted(set(body.get("inferenceConfig") or {}) - INFERENCE):
            return invalid(f"extraneous key [{extra[0]}] is not permitted")
        config = body.get("inferenceConfig") or {}
        if "temperature" in config and not 0 <= config["temperature"] <= 1:
            return invalid("inferenceConfig.temperature: must be between 0 and 1")
        if "maxTokens" in config and (
            not isinstance(config["maxTokens"], int) or config["maxTokens"] < 1
        ):  # noqa: E501
            return invalid("inferenceConfig.maxTokens: must be at least 1")
        roles = [m.get("role") for m in body["messages"]]
        if roles[0] != "user" or any(a == b for a, b in zip(roles, roles[1:], strict=False)):
            return invalid(
                "A conversation must start with a user message and alternate user and assistant turns."
            )  # noqa: E501
        for i, message in enumerate(body["messages"]):
            for j, block in enumerate(message.get("content") or ()):
                if len(block) != 1 or next(iter(block)) not in BLOCKS:
                    return invalid(f"messages.{i}.content.{j}: a block holds exactly one member")
                if problem := _media(block) or _reasoning(block):
                    return invalid(f"messages.{i}.content.{j}{problem}")
        if (problem := self._tool_loop(body)) is not None:
            return invalid(problem)
        for block in body.get("system") or ():
            if len(block) != 1 or next(iter(block)) not in ("text", "guardContent", "cachePoint"):
                return invalid("system: a block is text, guardContent or cachePoint")
        points = [
            b["cachePoint"]
            for blocks in (body.get("system") or (), (body.get("toolConfig") or {}).get("tools") or (),
                           *((m.get("content") or ()) for m in body["messages"]))
            for b in blocks
            if "cachePoint" in b
        ]  # fmt: skip
        for point in points:
            if point.get("type") != "default" or set(point) - {"type", "ttl"}:
                return invalid("cachePoint: type must be default")
            if point.get("ttl", "5m") not in ("5m", "1h"):
                return invalid("cachePoint.ttl: must be 5m or 1h")
        if len(points) > 4:
            return invalid("A maximum of 4 blocks with cache_control may be provided.")
        tools = body.get("toolConfig")
        if tools is not None:
            names = {t["toolSpec"]["name"] for t in tools.get("tools") or () if "toolSpec" in t}
            if not names or set(tools) - {"tools", "toolChoice"}:
                return invalid("toolConfig: needs tools")
            chosen = (tools.get("toolChoice") or {}).get("tool", {}).get("name")
            if chosen is not None and chosen not in names:
                return invalid("toolConfig.toolChoice.tool.name: names no tool")
        return None

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return urlsplit(path).path.endswith("/converse-stream")

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return (body.get("inferenceConfig") or {}).get("maxTokens")

    def usage(self, reply: Reply, output: int) -> dict[str, Any]:
        u = reply.usage
        fresh = u.prompt_tokens - u.cached_tokens - u.cache_write_tokens
        return {"inputTokens": fresh, "outputTokens": output,
                "totalTokens": u.prompt_tokens + output,
                "cacheReadInputTokens": u.cached_tokens,
                "cacheWriteInputTokens": u.cache_write_tokens,
                # Writes by lifetime, 1h before 5m; empty without writes.
                "cacheDetails": [
                    {"ttl": ttl, "inputTokens": n}
                    for ttl, n in (("1h", u.cache_write_1h_tokens),
                                   ("5m", u.cache_write_tokens - u.cache_write_1h_tokens))
                    if n
                ]}  # fmt: skip

    def _tool(self, body: dict[str, Any]) -> str | None:
        tools = (body.get("toolConfig") or {}).get("tools") or []
        names = [t["toolSpec"]["name"] for t in tools if "toolSpec" in t]
        if not names:
            return None
        forced = ((body.get("toolConfig") or {}).get("toolChoice") or {}).get("tool")
        last = body["messages"][-1]["content"]
        if forced is None and any("toolResult" in b for b in last):
            return None
        return str(forced["name"]) if forced else names[0]

    def _tool_loop(self, body: dict[str, Any]) -> str | None:
        """Anthropic's rule with thinking on: when the conversation ends in tool results,
        the assistant turn that made the calls starts with its reasoning."""
        thinking = (body.get("additionalModelRequestFields") or {}).get("thinking") or {}
        messages = body["messages"]
        if thinking.get("type") != "enabled" or len(messages) < 2:
            return None
        if not any("toolResult" in b for b in messages[-1]["content"]):
            return None
        first = next(iter(messages[-2]["content"][0]))
        if first == "reasoningContent":
            return None
        found = {"toolUse": "tool_use", "text": "text"}.get(first, first)
        return (
            f"The model returned the following errors: messages.{len(messages) - 2}.content.0"
            f".type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When "
            "`thinking` is enabled, a final `assistant` message must start with a thinking "
            "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
            "recommend you include thinking blocks from previous turns. To avoid this "
            "requirement, disable `thinking`."
        )

    def _thinks(self, body: dict[str, Any]) -> bool:
        thinking = (body.get("additionalModelRequestFields") or {}).get("thinking") or {}
        return self.always_reasons or thinking.get("type") == "enabled"

    def _stop(self, body: dict[str, Any], reply: Reply) -> str:
        if GUARDED in json.dumps(body["messages"]):
            return "guardrail_intervened"
        return "tool_use" if self._tool(body) else STOP[reply.finish]

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        if path.endswith("/invoke"):
            size = body.get("dimensions") or 8
            vector = [round(len(body["inputText"]) / 100, 4)] * size
            return {}, {"embedding": vector, "inputTextTokenCount": len(body["inputText"].split())}
        content: list[Any] = [{"text": "".join(reply.tokens)}]
        tool = self._tool(body)
        if tool is not None:
            content = [{"toolUse": {"toolUseId": "tooluse_fake", "name": tool,
                                    "input": shapes.ARGUMENTS}}]  # fmt: skip
        if self._thinks(body):
            said = {"text": "".join(REASONING), "signature": SIGNATURE}
            content.insert(0, {"reasoningContent": {"reasoningText": said}})
        answer = {"output": {"message": {"role": "assistant", "content": content}},
                  "stopReason": self._stop(body, reply),
                  "usage": self.usage(reply, len(reply.tokens)), "metrics": {"latencyMs": 12}}  # fmt: skip
        return {}, answer

    def stream(
        self, path: str, body: dict[str, Any], reply: Reply
    ) -> tuple[list[bytes], list[bytes], list[bytes]]:
        before = [event("messageStart", {"role": "assistant"})]
        text = 0
        if self._thinks(body):
            text = 1
            before += [
                *(event("contentBlockDelta", {"contentBlockIndex": 0,
                                              "delta": {"reasoningContent": {"text": piece}}})
                  for piece in REASONING),
                event("contentBlockDelta", {"contentBlockIndex": 0,
                                            "delta": {"reasoningContent": {"signature": SIGNATURE}}}),
                event("contentBlockStop", {"contentBlockIndex": 0}),
            ]  # fmt: skip
        per_token = [
            event("contentBlockDelta", {"contentBlockIndex": text, "delta": {"text": t}})
            for t in reply.tokens
        ]
        if self.mid_stream is not None:
            return before, [*per_token[:2], exception(self.mid_stream, "Model is busy.")], []
        after = [event("contentBlockStop", {"contentBlockIndex": text})]
        tool = self._tool(body)
        if tool is not None:
            start = {"toolUse": {"toolUseId": "tooluse_fake", "name": tool}}
            after += [
                event("contentBlockStart", {"contentBlockIndex": text + 1, "start": start}),
                *(event("contentBlockDelta", {"contentBlockIndex": text + 1,
                                              "delta": {"toolUse": {"input": f}}})
                  for f in shapes.ARGUMENT_FRAGMENTS),
                event("contentBlockStop", {"contentBlockIndex": text + 1}),
            ]  # fmt: skip
        after += [
            event("messageStop", {"stopReason": self._stop(body, reply)}),
            event("metadata", {"usage": self.usage(reply, len(reply.tokens)),
                               "metrics": {"latencyMs": 12}}),
        ]  # fmt: skip
        return before, per_token, after

    def error(self, status: int) -> Any:
        return {"message": f"fake upstream {status}"}


IMAGE_FORMATS = frozenset({"png", "jpeg", "gif", "webp"})
DOCUMENT_FORMATS = frozenset({"pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md"})


def _media(block: dict[str, Any]) -> str | None:
    """What is wrong with an image or document block (the service model's shapes)."""
    kind, value = next(iter(block.items()))
    formats = {"image": IMAGE_FORMATS, "document": DOCUMENT_FORMATS}.get(kind)
    if formats is None:
        return None
    if value.get("format") not in formats:
        return f".{kind}.format: must be one of {sorted(formats)}"
    if kind == "document" and not value.get("name"):
        return ".document.name: is required"
    data = (value.get("source") or {}).get("bytes")
    try:
        base64.b64decode(data, validate=True)
    except (TypeError, ValueError):
        return f".{kind}.source.bytes: must be base64"
    return None


def _reasoning(block: dict[str, Any]) -> str | None:
    """What is wrong with reasoning given back: only what this fake said, as it
    signed it, is taken (Anthropic's models check the signature)."""
    if "reasoningContent" not in block:
        return None
    if block["reasoningContent"].get("reasoningText") != {"text": "".join(REASONING),
                                                          "signature": SIGNATURE}:  # fmt: skip
        return ": Invalid `signature` in `thinking` block"
    return None


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message, encoded from AWS's description of the framing."""
    raw = b""
    for name, value in headers.items():
        data = value.encode()
        raw += struct.pack(">B", len(name)) + name.encode() + b"\x07"
        raw += struct.pack(">H", len(data)) + data
    total = 12 + len(raw) + len(payload) + 4
    prelude = struct.pack(">II", total, len(raw))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + raw + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event(kind: str, data: dict[str, Any]) -> bytes:
    # Bedrock pads events with a `p` field of varying length, to hide token lengths.
    padded = {**data, "p": "abcdefghij"[: len(kind) % 10]}
    return frame({":event-type": kind, ":content-type": "application/json",
                  ":message-type": "event"}, json.dumps(padded).encode())  # fmt: skip


def exception(kind: str, message: str) -> bytes:
    return frame({":exception-type": kind, ":content-type": "application/json",
                  ":message-type": "exception"}, json.dumps({"message": message}).encode())  # fmt: skip


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
