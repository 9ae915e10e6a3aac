"""Profiles as operating points: a difficulty threshold per profile, set so that a target share
of calls goes to the stronger tier, plus the score distribution the thresholds were set on.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from server.base.config import PROFILES

# Share of calls each profile sends to the stronger tier on data like the training data.
DEFAULT_STRONG_SHARES: dict[str, float] = dict(zip(PROFILES, (0.2, 0.45, 0.8), strict=True))
# Quantiles of the training scores kept in the model file, for drift checks.
QUANTILE_POINTS = 20


def quantile(sorted_scores: Sequence[float], q: float) -> float:
    """The q-quantile of ascending scores, interpolated linearly; q in [0, 1]."""
    if not sorted_scores:
        raise ValueError("no scores")
    position = q * (len(sorted_scores) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_scores) - 1)
    fraction = position - low
    return sorted_scores[low] * (1 - fraction) + sorted_scores[high] * fraction


def threshold_for_share(sorted_scores: Sequence[float], share: float) -> float:
    """A threshold such that about `share` of the scores are at or above it."""
    if share <= 0:
        return 1.0 + 1e-9
    if share >= 1:
        return 0.0
    return quantile(sorted_scores, 1.0 - share)


def share_at_or_above(sorted_scores: Sequence[float], threshold: float) -> float:
    """The share of ascending scores at or above `threshold`."""
    if not sorted_scores:
        return 0.0
    return (len(sorted_scores) - bisect.bisect_left(sorted_scores, threshold)) / len(sorted_scores)


@dataclass(frozen=True)
class Calibration:
    """A threshold per profile: a difficulty at or above it goes to the stronger tier."""

    thresholds: dict[str, float]
    strong_shares: dict[str, float]
    # Training scores at quantiles 0, 1/QUANTILE_POINTS, ..., 1.
    score_quantiles: list[float] = field(default_factory=list)
    score_mean: float = 0.0
    rows: int = 0

    @classmethod
    def fit(
        cls, scores: Sequence[float], strong_shares: dict[str, float] | None = None
    ) -> Calibration:
        """Thresholds that send each profile's target share of `scores` to the strong tier."""
        shares = dict(DEFAULT_STRONG_SHARES if strong_shares is None else strong_shares)
        ordered = sorted(scores)
        return cls(
            thresholds={p: threshold_for_share(ordered, s) for p, s in shares.items()},
            strong_shares=shares,
            score_quantiles=[
                quantile(ordered, i / QUANTILE_POINTS) for i in range(QUANTILE_POINTS + 1)
            ],
            score_mean=sum(ordered) / len(ordered),
            rows=len(ordered),
        )

    def wants_strong(self, profile: str, difficulty: float) -> bool:
        """Whether `profile` sends a prompt of this difficulty to the stronger tier."""
        return difficulty >= self.thresholds[profile]

    def to_json(self) -> dict[str, Any]:
        return {
            "profiles": {
                p: {"threshold": round(self.thresholds[p], 6), "strong_share": s}
                for p, s in self.strong_shares.items()
            },
            "score_quantiles": [round(q, 6) for q in self.score_quantiles],
            "score_mean": round(self.score_mean, 6),
            "rows": self.rows,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Calibration:
        profiles = doc["profiles"]
        return cls(
            thresholds={p: float(v["threshold"]) for p, v in profiles.items()},
            strong_shares={p: float(v["strong_share"]) for p, v in profiles.items()},
            score_quantiles=[float(q) for q in doc.get("score_quantiles", [])],
            score_mean=float(doc.get("score_mean", 0.0)),
            rows=int(doc.get("rows", 0)),
        )
