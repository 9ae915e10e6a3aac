"""Builds the configured routing policy and its difficulty scorer."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from server.base.config import Config, ConfigError, RoutingConfig
from server.routing import training
from server.routing.calibration import Calibration
from server.routing.features import FeatureScorer
from server.routing.live import LiveCalibration
from server.routing.router import OrderedProfiles, Router
from server.routing.scored import ScoredRouter, Scorer
from server.routing.scorer import DEFAULT_MODEL_PATH, LearnedScorer
from server.routing.tags import Rated
from server.routing.view import CatalogView


def build_router(config: Config, catalog: CatalogView) -> Router:
    routing = config.routing
    if routing.policy == "ordered":
        return OrderedProfiles(routing)
    return ScoredRouter(routing, catalog, load_scorer(routing), config.limits.default_max_tokens)


class LiveScorer:
    """A difficulty scorer under live calibration (see `server.routing.live`): each
    profile's threshold follows recent traffic toward its target share, and feedback on
    recent requests decides whether the feature scorer is blended in."""

    def __init__(
        self,
        name: str,
        scorer: LearnedScorer | FeatureScorer,
        calibration: Calibration,
        feature_calibration: Calibration | None = None,
    ) -> None:
        self.name = name
        self._scorer = scorer
        # The configured model: every refit starts from it, not from the last refit.
        self._base = scorer.document if isinstance(scorer, LearnedScorer) else None
        self._live = LiveCalibration(
            calibration, feature_calibration.score_quantiles if feature_calibration else ()
        )
        self.quality_priors = scorer.quality_priors if isinstance(scorer, LearnedScorer) else {}
        self.mean_difficulty = calibration.score_mean or 0.5
        # Request id -> (learned, feature) of recent decisions, for feedback to label.
        self._recent: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @property
    def drifting(self) -> bool:
        return self._live.drifting

    def difficulty(
        self,
        prompt: str,
        max_tokens: int | None,
        request_id: str = "",
        tags: Sequence[str] = (),
    ) -> float:
        if isinstance(self._scorer, LearnedScorer):
            learned, feature = self._scorer.difficulties(prompt, max_tokens, tags)
        else:
            learned = feature = self._scorer.difficulty(prompt, max_tokens)
        self._live.observe(learned, feature)
        if request_id:
            self._recent[request_id] = (learned, feature)
            if len(self._recent) > RECENT_REQUESTS:
                self._recent.popitem(last=False)
        return self._live.difficulty(learned, feature)

    def threshold(self, profile: str) -> float:
        return self._live.threshold(profile)

    def decided(self, profile: str, upward: bool) -> None:
        self._live.decided(profile, upward)

    def shares(self) -> dict[str, tuple[float, float | None]]:
        return self._live.shares()

    @property
    def learns(self) -> bool:
        """Whether ratings can refit this scorer (the feature scorer has no fit)."""
        return self._base is not None

    def refitted(self, rated: Sequence[Rated]) -> LearnedScorer:
        """A scorer fitted anew on `rated`, with the configured model as its prior (see
        `training.refit`). Pure: safe to run in a thread."""
        if self._base is None:
            raise ValueError("the feature scorer is not refitted")
        return LearnedScorer(training.refit(self._base, rated))

    def current(self) -> LearnedScorer | FeatureScorer:
        return self._scorer

    def use(self, scorer: LearnedScorer) -> None:
        """Serves `scorer` from now on; the live window and its thresholds carry over."""
        self._scorer = scorer
        self.quality_priors = scorer.quality_priors

    def feedback(self, request_id: str, score: float) -> bool:
        """Labels a recent request with feedback on its answer (1: the answer was good
        enough). False when the request is no longer remembered."""
        scores = self._recent.get(request_id)
        if scores is None:
            return False
        self._live.label(*scores, target=1.0 - min(1.0, max(0.0, score)))
        return True


# Enough to label feedback that arrives within a few minutes of busy traffic.
RECENT_REQUESTS = 10_000


def load_scorer(routing: RoutingConfig) -> Scorer:
    """The configured scorer. The model file (`scorer_path`, or the shipped one) holds
    both scorers' calibrations: the feature scorer needs no training, only thresholds."""
    path = Path(routing.scorer_path) if routing.scorer_path else DEFAULT_MODEL_PATH
    document = _read(path)
    try:
        features = Calibration.from_json(document["feature_calibration"])
        if routing.scorer == "features":
            return LiveScorer("features", FeatureScorer(), features)
        learned = LearnedScorer(document)
        return LiveScorer("learned", learned, learned.calibration, features)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"routing.scorer_path: {path} is not a scorer model ({exc})") from None


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"routing.scorer_path: cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise ConfigError(f"routing.scorer_path: {path} is not JSON") from None
