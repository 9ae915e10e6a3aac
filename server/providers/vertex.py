"""Vertex AI adapter: Google's models in the Gemini format (gemini.py) and
Anthropic's in the Messages format (anthropic.py), at a project's and location's
Vertex endpoints, signed in with Google Cloud credentials (google_cloud.py).

- `google` publisher: `.../publishers/google/models/{model}:generateContent`,
  `:streamGenerateContent?alt=sse` and `:countTokens` (which takes the request's
  contents, not a whole request); embeddings by `:predict` (`instances` of `content`,
  `outputDimensionality`), with the token count Vertex reports; speech generation and
  Imagen as the Gemini API serves them (google_media.py).
- `anthropic` publisher: `.../publishers/anthropic/models/{model}:rawPredict` and
  `:streamRawPredict`, a Messages body without `model` and with `anthropic_version`
  (vertex-2023-10-16); `count-tokens:rawPredict` counts. Thinking signatures,
  cache_control and the rest pass as on Anthropic's own API.

Thought signatures from a Vertex provider are sealed with its id like any other, so
they are never sent to the Gemini API (or another project) that did not make them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from server.base.embedding import EmbeddingRequest, Embeddings
from server.base.errors import UpstreamRejected
from server.providers.anthropic import AnthropicParams, AnthropicProvider
from server.providers.gemini import GeminiParams, GeminiProvider, check
from server.providers.google_cloud import GoogleSignIn, VertexPlace
from server.providers.http import (
    Client,
    ProtocolViolation,
    count,
    make_client,
    read_json,
    upstream_errors,
)

ANTHROPIC_VERSION = "vertex-2023-10-16"


class VertexGeminiParams(VertexPlace, GeminiParams):
    pass


class VertexAnthropicParams(VertexPlace, AnthropicParams):
    pass


def publisher(params: dict[str, Any]) -> str:
    """The publisher a vertex params entry names, or the one its model implies."""
    named = params.get("publisher")
    if named is not None:
        return str(named)
    return "anthropic" if str(params.get("model", "")).startswith("claude") else "google"


class VertexGeminiProvider(GeminiProvider):
    params: VertexGeminiParams

    def __init__(self, provider_id: str, params: VertexGeminiParams, where: str) -> None:
        self._sign_in = GoogleSignIn(provider_id, params, where)
        super().__init__(provider_id, params, where)

    def make_client(self, params: GeminiParams, where: str) -> Client:
        return make_client(params, {})

    def live_socket(self) -> tuple[str, dict[str, str]] | None:
        return None  # Vertex's Live API is its own (LlmBidiService): not relayed

    def model_path(self, model: str) -> str:
        return f"{self.params.prefix('google')}/{quote(model.removeprefix('models/'), safe='')}"

    async def request_headers(self) -> tuple[tuple[str, str], ...]:
        return await self._sign_in.headers()

    def count_body(self, body: dict[str, Any]) -> dict[str, Any]:
        return body

    async def embed(self, request: EmbeddingRequest) -> Embeddings:
        if any(not isinstance(i, str) for i in request.inputs):
            raise UpstreamRejected(
                f"input: {self.id} (Vertex) embeds text, not token ids",
                {"provider": self.id, "field": "input"},
            )
        model = self.model_path(self.params.embedding_model or self.params.model)
        body: dict[str, Any] = {"instances": [{"content": text} for text in request.inputs]}
        if request.dimensions is not None:
            body["parameters"] = {"outputDimensionality": request.dimensions}
        with upstream_errors(self.id):
            async with self._client.stream(
                "POST", f"{model}:predict", json=body, extra_headers=await self.request_headers()
            ) as r:
                await check(r, self.id)
                answer = await read_json(r)
            predictions = answer.get("predictions")
            if not isinstance(predictions, list) or len(predictions) != len(request.inputs):
                raise ProtocolViolation("predictions do not match the inputs")
            embeddings = [p["embeddings"] for p in predictions]
            used = [(e.get("statistics") or {}).get("token_count") for e in embeddings]
            tokens = (
                sum(count(u, "statistics.token_count") for u in used)
                if all(u is not None for u in used)
                else None
            )
            vectors = tuple(tuple(float(v) for v in e["values"]) for e in embeddings)
            return Embeddings(vectors, tokens)


class VertexAnthropicProvider(AnthropicProvider):
    params: VertexAnthropicParams

    def __init__(self, provider_id: str, params: VertexAnthropicParams, where: str) -> None:
        self._sign_in = GoogleSignIn(provider_id, params, where)
        self._prefix = params.prefix("anthropic")
        super().__init__(provider_id, params, where)

    def messages_path(self) -> str:
        method = "streamRawPredict" if self.params.stream else "rawPredict"
        return f"{self._prefix}/{quote(self.params.model, safe='@')}:{method}"

    def count_path(self) -> str:
        return f"{self._prefix}/count-tokens:rawPredict"

    def wire(self, body: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in body.items() if k != "model"}
        out["anthropic_version"] = ANTHROPIC_VERSION
        return out

    async def request_headers(self) -> tuple[tuple[str, str], ...]:
        return await self._sign_in.headers()
