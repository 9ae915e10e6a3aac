"""Calibration from live traffic: each profile's thresholds re-centred on a window of recent
difficulties, so that each profile sends its target share of calls up the ladder whatever the
traffic looks like.

A scorer's trained thresholds hold only for prompts like its training data; on other traffic
its scores shift, and a profile calibrated to send 45% of calls upward may send 5% or 95%.
`LiveCalibration` keeps the last `window` difficulties and sets every threshold at the
quantile that gives the profile's target share. The window starts with `prior` scores spread
like the training scores, so the first requests are served at the trained thresholds and live
traffic takes over as it arrives.

The hand-set feature scorer is blended in (`feature_weight`) only where it helps: when the
window holds at least `min_labelled` prompts with feedback, the blend is kept if it ranks them
better than the learned difficulty alone; without feedback, while the learned scores drift off
their training distribution by more than `tolerance` (hand-made features transfer across
domains better than n-grams).

Deterministic: the same sequence of calls gives the same state.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from server.routing.calibration import Calibration, quantile, share_at_or_above, threshold_for_share


class LiveCalibration:
    """Tracks recent difficulties and keeps each profile's upward share on target."""

    def __init__(
        self,
        calibration: Calibration,
        feature_quantiles: Sequence[float] = (),
        *,
        window: int = 500,
        prior: int = 100,
        tolerance: float = 0.05,
        feature_weight: float = 0.5,
        refresh_every: int = 20,
        min_labelled: int = 50,
    ) -> None:
        self.calibration = calibration
        self.tolerance = tolerance
        self.feature_weight = feature_weight
        self.refresh_every = refresh_every
        self.min_labelled = min_labelled
        self._targets = dict(calibration.strong_shares)
        self._learned: deque[float] = deque(maxlen=window)
        self._features: deque[float] = deque(maxlen=window)
        learned_q = calibration.score_quantiles or [0.0, 1.0]
        feature_q = list(feature_quantiles) or learned_q
        for i in range(prior):
            q = i / max(1, prior - 1)
            self._learned.append(quantile(learned_q, q))
            self._features.append(quantile(feature_q, q))
        self._labelled: deque[tuple[float, float, float]] = deque(maxlen=window)
        self._served: dict[str, deque[bool]] = {p: deque(maxlen=window) for p in self._targets}
        # Running counts of upward decisions in `_served`: shares are read on every decision.
        self._upward = dict.fromkeys(self._targets, 0)
        self._observed = 0
        self._drifting = False
        self._blending = False
        self.blend_reason = "off"
        self._thresholds = dict(calibration.thresholds)

    @property
    def drifting(self) -> bool:
        """Whether the learned scores of the window stray from their training distribution."""
        return self._drifting

    @property
    def blending(self) -> bool:
        """Whether the feature scorer is blended into the difficulty now."""
        return self._blending

    def observe(self, learned: float, feature: float) -> None:
        """Records one prompt's learned and feature difficulties."""
        self._learned.append(learned)
        self._features.append(feature)
        self._observed += 1
        # Re-sorting the window on every call would cost more than the scoring itself.
        if self._observed % self.refresh_every == 0:
            self._refresh()

    def label(self, learned: float, feature: float, target: float) -> None:
        """Records feedback on a served prompt: `target` 1 when the cheaper model fell short."""
        self._labelled.append((learned, feature, target))

    def decided(self, profile: str, upward: bool) -> None:
        """Records whether a decision of `profile` went past the cheapest model."""
        served = self._served.get(profile)
        if served is None:
            return
        if len(served) == served.maxlen:
            self._upward[profile] -= served[0]
        served.append(upward)
        self._upward[profile] += upward

    def difficulty(self, learned: float, feature: float) -> float:
        """The difficulty to route on: the learned one, or a blend while blending."""
        if not self._blending:
            return learned
        return self._blend(learned, feature)

    def threshold(self, profile: str) -> float:
        """The profile's current threshold."""
        return self._thresholds[profile]

    def wants_strong(self, profile: str, learned: float, feature: float) -> bool:
        """Whether `profile` sends this prompt past the cheapest model."""
        return self.difficulty(learned, feature) >= self._thresholds[profile]

    def shares(self) -> dict[str, tuple[float, float | None]]:
        """Per profile: its target share and the share of its recent decisions that went
        past the cheapest model (None before any)."""
        return {
            p: (target, self._upward[p] / len(self._served[p]) if self._served[p] else None)
            for p, target in self._targets.items()
        }

    def calibrated_shares(self, ordered: Sequence[float] | None = None) -> dict[str, float]:
        """Per profile, the share of the window's learned scores (`ordered`: already
        sorted) above the trained threshold."""
        ordered = sorted(self._learned) if ordered is None else ordered
        return {
            profile: share_at_or_above(ordered, threshold)
            for profile, threshold in self.calibration.thresholds.items()
        }

    def _blend(self, learned: float, feature: float) -> float:
        return (1.0 - self.feature_weight) * learned + self.feature_weight * feature

    def _refresh(self) -> None:
        ordered = sorted(self._learned)
        shares = self.calibrated_shares(ordered)
        worst = max(abs(shares[p] - self._targets[p]) for p in shares)
        if self._drifting and worst <= 0.6 * self.tolerance:
            self._drifting = False
        elif not self._drifting and worst > self.tolerance:
            self._drifting = True
        if len(self._labelled) >= self.min_labelled:
            learned_auc = auc([(lr, y) for lr, _, y in self._labelled])
            blended_auc = auc([(self._blend(lr, f), y) for lr, f, y in self._labelled])
            self._blending = blended_auc > learned_auc
            self.blend_reason = "feedback"
        else:
            self._blending = self._drifting
            self.blend_reason = "drift"
        served = (
            sorted(map(self._blend, self._learned, self._features)) if self._blending else ordered
        )
        self._thresholds = {p: threshold_for_share(served, s) for p, s in self._targets.items()}


def auc(scored: Sequence[tuple[float, float]]) -> float:
    """How often a prompt whose cheaper answer fell short (target above 0.5) scores above
    one whose did not; ties count half. 0.5 when either kind is missing."""
    ordered = sorted(scored)
    positives = sum(1 for _, y in ordered if y > 0.5)
    negatives = len(ordered) - positives
    if not positives or not negatives:
        return 0.5
    wins, below, i = 0.0, 0, 0
    while i < len(ordered):
        j = i
        while j < len(ordered) and ordered[j][0] == ordered[i][0]:
            j += 1
        pos = sum(1 for _, y in ordered[i:j] if y > 0.5)
        wins += pos * below + pos * (j - i - pos) / 2
        below += j - i - pos
        i = j
    return wins / (positives * negatives)
