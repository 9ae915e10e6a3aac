"""What routing reads of the catalog: models, and the live state of their providers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from server.base.config import ModelConfig


class ProviderView(Protocol):
    @property
    def enabled(self) -> bool: ...

    @property
    def usable(self) -> bool:
        """Enabled, and its circuit not open."""
        ...

    @property
    def capabilities(self) -> frozenset[str]: ...

    @property
    def observed_ttft_ms(self) -> float | None:
        """Its recent time to first token; None before it has answered."""
        ...


class CatalogView(Protocol):
    @property
    def models(self) -> Sequence[ModelConfig]: ...

    def model(self, model_id: str) -> ModelConfig: ...

    def providers(self, model_id: str) -> Sequence[ProviderView]: ...
