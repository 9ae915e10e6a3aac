"""Builds the configured routing policy and its difficulty scorer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from server.base.config import Config, ConfigError, RoutingConfig
from server.routing.calibration import Calibration
from server.routing.drift import DriftGuard
from server.routing.features import FeatureScorer
from server.routing.router import OrderedProfiles, Router
from server.routing.scored import ScoredRouter, Scorer
from server.routing.scorer import DEFAULT_MODEL_PATH, LearnedScorer
from server.routing.view import CatalogView


def build_router(config: Config, catalog: CatalogView) -> Router:
    routing = config.routing
    if routing.policy == "ordered":
        return OrderedProfiles(routing)
    return ScoredRouter(routing, catalog, load_scorer(routing), config.limits.default_max_tokens)


class Calibrated:
    """A difficulty scorer with the per-profile thresholds its training calibrated."""

    def __init__(self, name: str, scorer: LearnedScorer | FeatureScorer, calibration: Calibration):
        self.name = name
        self._scorer = scorer
        self._thresholds = calibration.thresholds
        self.drifting = False

    def difficulty(self, prompt: str, max_tokens: int | None) -> float:
        return self._scorer.difficulty(prompt, max_tokens)

    def threshold(self, profile: str) -> float:
        return self._thresholds[profile]


class Guarded:
    """The learned scorer under a drift guard: while recent traffic sends shares of calls
    to the strong tier far from the calibrated ones, the guard blends in the feature
    scorer (which transfers across domains) and re-centres the thresholds."""

    name = "learned"

    def __init__(self, learned: LearnedScorer, features: FeatureScorer) -> None:
        self._learned = learned
        self._features = features
        self._guard = DriftGuard(learned.calibration)

    @property
    def drifting(self) -> bool:
        return self._guard.drifting

    def difficulty(self, prompt: str, max_tokens: int | None) -> float:
        learned = self._learned.difficulty(prompt, max_tokens)
        feature = self._features.difficulty(prompt, max_tokens)
        self._guard.observe(learned, feature)
        return self._guard.difficulty(learned, feature)

    def threshold(self, profile: str) -> float:
        return self._guard.threshold(profile)


def load_scorer(routing: RoutingConfig) -> Scorer:
    """The configured scorer. The model file (`scorer_path`, or the shipped one) holds
    both scorers' calibrations: the feature scorer needs no training, only thresholds."""
    path = Path(routing.scorer_path) if routing.scorer_path else DEFAULT_MODEL_PATH
    document = _read(path)
    try:
        if routing.scorer == "features":
            calibration = Calibration.from_json(document["feature_calibration"])
            return Calibrated("features", FeatureScorer(), calibration)
        return Guarded(LearnedScorer(document), FeatureScorer())
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"routing.scorer_path: {path} is not a scorer model ({exc})") from None


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"routing.scorer_path: cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise ConfigError(f"routing.scorer_path: {path} is not JSON") from None
