"""Builds the configured routing policy and its difficulty scorer."""

from __future__ import annotations

from pathlib import Path

from server.core.catalog import Catalog
from server.core.config import Config, ConfigError, RoutingConfig
from server.routing.router import OrderedProfiles, Router
from server.routing.scored import ScoredRouter, Scorer


def build_router(config: Config, catalog: Catalog) -> Router:
    routing = config.routing
    if routing.policy == "ordered":
        return OrderedProfiles(routing)
    return ScoredRouter(routing, catalog, load_scorer(routing), config.limits.default_max_tokens)


class LearnedDifficulty:
    """The learned scorer with the thresholds its training calibrated."""

    name = "learned"

    def __init__(self, path: str | Path | None) -> None:
        from server.routing.scorer import DEFAULT_MODEL_PATH, LearnedScorer

        try:
            self._scorer = LearnedScorer.load(path or DEFAULT_MODEL_PATH)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(f"routing.scorer_path: cannot load {path}: {exc}") from None
        self._thresholds = self._scorer.calibration.thresholds

    def difficulty(self, prompt: str, max_tokens: int | None) -> float:
        return self._scorer.difficulty(prompt, max_tokens)

    def threshold(self, profile: str) -> float:
        return self._thresholds[profile]


class FeatureDifficulty:
    """The training-free feature scorer; its thresholds come from the config, or from
    its calibration on the shipped evaluation data (docs/routing-eval.md)."""

    name = "features"
    THRESHOLDS = {"economy": 0.62, "balanced": 0.45, "quality": 0.25}

    def __init__(self) -> None:
        from server.routing.features import FeatureScorer

        self._scorer = FeatureScorer()

    def difficulty(self, prompt: str, max_tokens: int | None) -> float:
        return self._scorer.difficulty(prompt, max_tokens)

    def threshold(self, profile: str) -> float:
        return self.THRESHOLDS[profile]


def load_scorer(routing: RoutingConfig) -> Scorer:
    if routing.scorer == "features":
        return FeatureDifficulty()
    return LearnedDifficulty(routing.scorer_path)
