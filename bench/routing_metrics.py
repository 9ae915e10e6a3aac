"""Quality-versus-cost metrics of a router that sends the highest-scored prompts to the
stronger model, as RouteLLM defines them.

With c the share of calls on the strong model and r the mean quality,
PGR(c) = (r(c) - r_weak) / (r_strong - r_weak); APGR is the area under PGR for c from 0 to
1 (random routing gives 0.5); CPT(x) is the smallest c at which PGR reaches x.
"""

from __future__ import annotations

from collections.abc import Sequence


def curve(
    scores: Sequence[float], weak: Sequence[float], strong: Sequence[float]
) -> list[tuple[float, float]]:
    """(strong share, mean quality) at every threshold a router can set on `scores`.

    Prompts with equal scores move together: no threshold separates them.
    """
    n = len(scores)
    order = sorted(range(n), key=lambda i: -scores[i])
    total = sum(weak)
    points = [(0.0, total / n)]
    i = 0
    while i < n:
        j = i
        while j < n and scores[order[j]] == scores[order[i]]:
            total += strong[order[j]] - weak[order[j]]
            j += 1
        points.append((j / n, total / n))
        i = j
    return points


def apgr(points: Sequence[tuple[float, float]], r_weak: float, r_strong: float) -> float:
    area = sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(points, points[1:], strict=False))
    return (area - r_weak) / (r_strong - r_weak)


def share_reaching(points: Sequence[tuple[float, float]], quality: float) -> float:
    """The smallest strong share whose quality reaches `quality`, interpolated."""
    for (c0, q0), (c1, q1) in zip(points, points[1:], strict=False):
        if q0 >= quality:
            return c0
        if q1 >= quality:
            return c0 + (c1 - c0) * (quality - q0) / (q1 - q0)
    return 1.0


def cpt(points: Sequence[tuple[float, float]], r_weak: float, r_strong: float, pgr: float) -> float:
    return share_reaching(points, r_weak + pgr * (r_strong - r_weak))


def summary(scores: Sequence[float], weak: Sequence[float], strong: Sequence[float]) -> dict:
    """APGR, CPT(50%), CPT(80%) and the strong share that keeps 95% of strong quality."""
    r_weak = sum(weak) / len(weak)
    r_strong = sum(strong) / len(strong)
    points = curve(scores, weak, strong)
    return {
        "apgr": apgr(points, r_weak, r_strong),
        "cpt50": cpt(points, r_weak, r_strong, 0.5),
        "cpt80": cpt(points, r_weak, r_strong, 0.8),
        "share_for_95": share_reaching(points, 0.95 * r_strong),
    }
