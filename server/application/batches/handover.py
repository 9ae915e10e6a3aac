"""Which batches are handed to a provider's own batch API (a model's `batch:
provider`): to the model's first enabled provider whose adapter speaks one that takes
the batch's endpoint. The clients are the providers' (server/providers/batch_apis.py),
given to the worker by the composition root."""

from __future__ import annotations

from server.base.config import ModelConfig, ProviderConfig

# The adapters whose upstream has a batch API, and the endpoints each takes.
ENDPOINTS = {
    "openai": ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"),
    "anthropic": ("/v1/messages",),
}


def provider_for(model: ModelConfig, endpoint: str) -> ProviderConfig | None:
    """The provider a model's batches of `endpoint` are handed to: its first enabled one
    whose adapter's batch API takes that endpoint."""
    return next(
        (p for p in model.providers
         if p.enabled and endpoint in ENDPOINTS.get(p.adapter, ())),
        None,
    )  # fmt: skip
