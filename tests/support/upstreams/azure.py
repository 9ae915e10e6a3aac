"""Azure OpenAI's wire, strict as the real service: OpenAI's bodies (openai.py) at
Azure's paths. A deployment path needs a deployment that exists and an `api-version`
it knows; the v1 path takes none. The key goes in `api-key` (a Bearer key is refused:
Azure wants an Entra token there), or an Entra token as `Authorization: Bearer`. A
prompt holding BLOCKED_WORD is refused by the content filter as Azure refuses it, and
FILTERED_WORD lets the prompt in but cuts the completion with `content_filter`.

AzureMediaWire is Azure's audio and image operations the same way: OpenAI's forms and
bodies (audio.py, images.py) at a deployment's path, each operation served only from
the api-versions that have it (speech and image edits from previews alone); Azure
serves no /moderations and no /rerank (404)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.upstreams.audio import AudioWire
from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import KEY, Refusal
from tests.support.upstreams.images import ImagesWire
from tests.support.upstreams.openai import OpenAIWire, error_body

API_VERSIONS = frozenset({"2024-06-01", "2024-10-21", "2025-04-01-preview"})
BLOCKED_WORD = "forbidden-topic"
FILTERED_WORD = "borderline-topic"
FILTERED_PROMPT = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content "
    "management policy. Please modify your prompt and retry."
)


@dataclass
class AzureWire(OpenAIWire):
    deployments: frozenset[str] = frozenset({"gpt-fake-deployment"})
    # An Entra ID token the service takes as Bearer, besides the api-key.
    token: str | None = None
    paths: list[str] = field(default_factory=list)

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        url = urlsplit(path)
        self.paths.append(url.path)
        refused = self._credential(headers) or self._where(url.path, parse_qs(url.query))
        if refused is None:
            # Past Azure's own checks, the body is checked as OpenAI checks it.
            as_openai = {"authorization": f"Bearer {self.key}"}
            refused = super().refusal(self._openai_path(url.path), as_openai, body)
        if refused is None and BLOCKED_WORD in str(body):
            refused = Refusal(400, error_body(FILTERED_PROMPT, "prompt", "content_filter"),
                              "content filter")  # fmt: skip
        return refused

    def _credential(self, headers: dict[str, str]) -> Refusal | None:
        return credential_refusal(headers, self.key, self.token)

    def _where(self, path: str, query: dict[str, list[str]]) -> Refusal | None:
        return where_refusal(path, query, self.deployments, API_VERSIONS)

    @staticmethod
    def _openai_path(path: str) -> str:
        return openai_path(path)

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return super().is_stream(self._openai_path(path), body)

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        return super().unary(self._openai_path(path), body, self._filtered(body, reply))

    def stream(self, path: str, body: dict[str, Any], reply: Reply) -> Any:
        return super().stream(self._openai_path(path), body, self._filtered(body, reply))

    @staticmethod
    def _filtered(body: dict[str, Any], reply: Reply) -> Reply:
        if FILTERED_WORD not in str(body):
            return reply
        return Reply(reply.tokens[:2], "content_filter", reply.usage)


def credential_refusal(
    headers: dict[str, str], key: str | None, token: str | None
) -> Refusal | None:
    """Azure's 401: neither the key in `api-key` nor the Entra token as Bearer."""
    given, auth = headers.get("api-key"), headers.get("authorization")
    if given is not None and given == key:
        return None
    if token is not None and auth == f"Bearer {token}":
        return None
    message = (
        "Access denied due to invalid subscription key or wrong API endpoint. Make sure "
        "to provide a valid key for an active subscription and use a correct regional "
        "API endpoint for your resource."
    )
    return Refusal(401, {"error": {"code": "401", "message": message}}, "bad credential")


NOT_FOUND = {"error": {"code": "404", "message": "Resource not found"}}


def where_refusal(
    path: str, query: dict[str, list[str]], deployments: frozenset[str], versions: frozenset[str]
) -> Refusal | None:
    """Azure's answer to a path that is neither v1's nor a known deployment's, or a
    deployment's without an api-version among `versions`."""
    if path.startswith("/openai/v1/"):
        return None
    parts = path.split("/")
    if len(parts) < 5 or parts[1:3] != ["openai", "deployments"]:
        return Refusal(404, NOT_FOUND, "unknown path")
    if parts[3] not in deployments:
        message = "The API deployment for this resource does not exist."
        return Refusal(404, {"error": {"code": "DeploymentNotFound", "message": message}},
                       "unknown deployment")  # fmt: skip
    version = query.get("api-version", [""])[0]
    if version not in versions:
        message = "Missing or unsupported api-version query parameter."
        return Refusal(400, {"error": {"code": "BadRequest", "message": message}},
                       "bad api-version")  # fmt: skip
    return None


def openai_path(path: str) -> str:
    """OpenAI's path for one of Azure's (`/openai/deployments/d/chat/completions`,
    `/openai/v1/chat/completions`: `/v1/chat/completions`), without the query."""
    path = urlsplit(path).path
    if path.startswith("/openai/deployments/"):
        return "/v1/" + path.split("/", 4)[4]
    return path.removeprefix("/openai")


GA_VERSIONS = frozenset({"2024-06-01", "2024-10-21"})
PREVIEW_VERSIONS = frozenset({"2025-04-01-preview"})
MEDIA_VERSIONS = GA_VERSIONS | PREVIEW_VERSIONS
# Each audio and image operation Azure serves at a deployment, and the api-versions
# that have it: speech and image edits are in previews only.
MEDIA_OPERATIONS = {
    "audio/transcriptions": GA_VERSIONS | PREVIEW_VERSIONS,
    "audio/translations": GA_VERSIONS | PREVIEW_VERSIONS,
    "images/generations": GA_VERSIONS | PREVIEW_VERSIONS,
    "audio/speech": PREVIEW_VERSIONS,
    "images/edits": PREVIEW_VERSIONS,
}


@dataclass
class AzureMediaWire:
    """Azure's audio and image operations (see the module's docstring); `audio` and
    `images` check and answer the bodies as OpenAI's do."""

    deployments: frozenset[str] = frozenset({"whisper", "tts", "image"})
    key: str | None = KEY
    token: str | None = None
    audio: AudioWire = field(default_factory=AudioWire)
    images: ImagesWire = field(default_factory=ImagesWire)
    paths: list[str] = field(default_factory=list)
    stream_content_type: str = "audio/mpeg"

    def _inner(self, path: str) -> AudioWire | ImagesWire:
        return self.audio if "/audio/" in path else self.images

    def parse(self, headers: dict[str, str], raw: bytes) -> dict[str, Any]:
        """A form's files as bytes (`file`, `image[]`, `mask`), other fields as text."""
        return self.images.parse(headers, raw)

    def refusal(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Refusal | None:
        url = urlsplit(path)
        self.paths.append(url.path)
        if url.path.startswith("/storage/"):  # the image links' storage: signed, no key
            return self.images.refusal(path, headers, body)
        refused = credential_refusal(headers, self.key, self.token)
        operation = url.path.split("/", 4)[4] if url.path.startswith("/openai/deployments/") \
            else url.path.removeprefix("/openai/v1/")  # fmt: skip
        if refused is None and operation not in MEDIA_OPERATIONS:
            refused = Refusal(404, NOT_FOUND, "not served by Azure")
        query = parse_qs(url.query)
        if refused is None:
            refused = where_refusal(url.path, query, self.deployments, MEDIA_VERSIONS)
        version = query.get("api-version", [""])[0]
        if refused is None and version and version not in MEDIA_OPERATIONS[operation]:
            refused = Refusal(404, NOT_FOUND, "operation not in this api-version")
        if refused is None:
            inner = self._inner(url.path)
            as_openai = {**headers, "authorization": f"Bearer {inner.key}"}
            refused = inner.refusal(openai_path(path), as_openai, body)
        return refused

    def is_stream(self, path: str, body: dict[str, Any]) -> bool:
        return self._inner(path).is_stream(openai_path(path), body)

    def max_tokens(self, body: dict[str, Any]) -> int | None:
        return None

    def unary(self, path: str, body: dict[str, Any], reply: Reply) -> tuple[dict[str, str], Any]:
        return self._inner(path).unary(openai_path(path), body, reply)

    def stream(self, path: str, body: dict[str, Any], reply: Reply) -> Any:
        inner = self._inner(path)
        self.stream_content_type = inner.stream_content_type
        return inner.stream(openai_path(path), body, reply)

    def error(self, status: int) -> Any:
        return error_body(f"fake failure {status}")
