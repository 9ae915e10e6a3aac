"""Azure OpenAI's wire, strict as the real service: OpenAI's bodies (openai.py) at
Azure's paths. A deployment path needs a deployment that exists and an `api-version`
it knows; the v1 path takes none. The key goes in `api-key` (a Bearer key is refused:
Azure wants an Entra token there), or an Entra token as `Authorization: Bearer`. A
prompt holding BLOCKED_WORD is refused by the content filter as Azure refuses it, and
FILTERED_WORD lets the prompt in but cuts the completion with `content_filter`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.upstreams.base import Reply
from tests.support.upstreams.checks import Refusal
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
        key, auth = headers.get("api-key"), headers.get("authorization")
        if key is not None and key == self.key:
            return None
        if self.token is not None and auth == f"Bearer {self.token}":
            return None
        message = (
            "Access denied due to invalid subscription key or wrong API endpoint. Make sure "
            "to provide a valid key for an active subscription and use a correct regional "
            "API endpoint for your resource."
        )
        return Refusal(401, {"error": {"code": "401", "message": message}}, "bad credential")

    def _where(self, path: str, query: dict[str, list[str]]) -> Refusal | None:
        if path.startswith("/openai/v1/"):
            return None
        parts = path.split("/")
        if len(parts) < 5 or parts[1:3] != ["openai", "deployments"]:
            return Refusal(404, {"error": {"code": "404", "message": "Resource not found"}},
                           "unknown path")  # fmt: skip
        if parts[3] not in self.deployments:
            message = "The API deployment for this resource does not exist."
            return Refusal(404, {"error": {"code": "DeploymentNotFound", "message": message}},
                           "unknown deployment")  # fmt: skip
        version = query.get("api-version", [""])[0]
        if version not in API_VERSIONS:
            message = "Missing or unsupported api-version query parameter."
            return Refusal(400, {"error": {"code": "BadRequest", "message": message}},
                           "bad api-version")  # fmt: skip
        return None

    @staticmethod
    def _openai_path(path: str) -> str:
        """OpenAI's path for one of Azure's (`/openai/deployments/d/chat/completions`,
        `/openai/v1/chat/completions`: `/v1/chat/completions`), without the query."""
        path = urlsplit(path).path
        if path.startswith("/openai/deployments/"):
            return "/v1/" + path.split("/", 4)[4]
        return path.removeprefix("/openai")

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
