"""Keeps each profile's strong share near its calibrated value when traffic drifts.

A learned scorer's thresholds hold only for prompts like the ones it was trained on. On
other traffic its scores shift, and a profile calibrated to send 45% of calls to the strong
tier may send 5% or 95%. `DriftGuard` watches a window of recent scores. When the share
above some profile's calibrated threshold strays more than `tolerance` from that profile's
target, it switches to drift mode: the difficulty becomes a blend of the learned and the
feature scorer (hand-made features transfer across domains better than n-grams), and each
threshold is re-centred on the quantile of recent blended scores that gives the target share.
It leaves drift mode when the learned scores are back within 60% of the tolerance; the
default window of 1000 prompts keeps sampling noise (about 1.6 points) below both bounds.

Deterministic: the same sequence of observations gives the same state.
"""

from __future__ import annotations

from collections import deque

from server.routing.calibration import Calibration, share_at_or_above, threshold_for_share


class DriftGuard:
    """Tracks recent difficulties and re-centres thresholds when strong shares drift."""

    def __init__(
        self,
        calibration: Calibration,
        *,
        window: int = 1000,
        tolerance: float = 0.05,
        min_samples: int = 200,
        feature_weight: float = 0.5,
        refresh_every: int = 20,
    ) -> None:
        self.calibration = calibration
        self.tolerance = tolerance
        self.min_samples = min_samples
        self.feature_weight = feature_weight
        self.refresh_every = refresh_every
        self._learned: deque[float] = deque(maxlen=window)
        self._features: deque[float] = deque(maxlen=window)
        self._observed = 0
        self._drifting = False
        self._thresholds = dict(calibration.thresholds)
        self._shares = dict(calibration.strong_shares)

    @property
    def drifting(self) -> bool:
        """Whether thresholds are currently re-centred and the feature scorer blended in."""
        return self._drifting

    def observe(self, learned: float, feature: float) -> None:
        """Records one prompt's learned and feature difficulties."""
        self._learned.append(learned)
        self._features.append(feature)
        self._observed += 1
        # Re-sorting the window on every call would cost more than the scoring itself.
        if self._observed % self.refresh_every == 0:
            self._refresh()

    def difficulty(self, learned: float, feature: float) -> float:
        """The difficulty to route on: the learned one, or a blend while drifting."""
        if not self._drifting:
            return learned
        return (1.0 - self.feature_weight) * learned + self.feature_weight * feature

    def threshold(self, profile: str) -> float:
        """The profile's current threshold: calibrated, or re-centred while drifting."""
        return self._thresholds[profile]

    def wants_strong(self, profile: str, learned: float, feature: float) -> bool:
        """Whether `profile` sends this prompt to the stronger tier."""
        return self.difficulty(learned, feature) >= self._thresholds[profile]

    def calibrated_shares(self) -> dict[str, float]:
        """Per profile, the share of recent learned scores above the calibrated threshold."""
        ordered = sorted(self._learned)
        return {
            profile: share_at_or_above(ordered, threshold)
            for profile, threshold in self.calibration.thresholds.items()
        }

    def _refresh(self) -> None:
        if len(self._learned) < self.min_samples:
            return
        shares = self.calibrated_shares()
        worst = max(abs(shares[p] - self.calibration.strong_shares[p]) for p in shares)
        if self._drifting and worst <= 0.6 * self.tolerance:
            self._drifting = False
        elif not self._drifting and worst > self.tolerance:
            self._drifting = True
        if not self._drifting:
            self._thresholds = dict(self.calibration.thresholds)
            return
        weight = self.feature_weight
        blended = sorted(
            (1.0 - weight) * learned + weight * feature
            for learned, feature in zip(self._learned, self._features, strict=True)
        )
        self._thresholds = {
            profile: threshold_for_share(blended, share) for profile, share in self._shares.items()
        }
