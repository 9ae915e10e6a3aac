"""Learning from rated traffic: the tags' estimates and the refit from every rating."""

from __future__ import annotations

import math

import pytest

from server.routing import tags, training
from server.routing.calibration import Calibration
from server.routing.scorer import LearnedScorer
from server.routing.tags import Rated, offset, offsets
from server.routing.training import TrainingOptions, refit, train
from tests.unit.routing.test_scorers import EASY, HARD


def logit(p: float) -> float:
    return math.log(p / (1 - p))


def rated(tag: str, cheapest: bool, score: float, count: int) -> list[Rated]:
    return [Rated(f"{tag} prompt {i}", (tag,), cheapest, score) for i in range(count)]


# The global failure rate of the cheapest rung is 0.5 (a: 10 failures, b: 10 passes),
# the upper rungs' success rate 0.75 (a: 10 of 10, b: 5 of 10).
RATED = (
    rated("a", True, 0.0, 10)
    + rated("b", True, 1.0, 10)
    + rated("a", False, 1.0, 10)
    + rated("b", False, 0.5, 10)
)


def test_each_tags_rates_are_shrunk_toward_the_global_ones_by_twenty_ratings() -> None:
    known = offsets(RATED)
    fail_a = (10 + 20 * 0.5) / 30
    success_a = (10 + 20 * 0.75) / 30
    success_b = (5 + 20 * 0.75) / 30
    assert known["a"] == pytest.approx((logit(fail_a), logit(success_a) - logit(0.75)), abs=1e-6)
    assert known["b"] == pytest.approx((-logit(fail_a), logit(success_b) - logit(0.75)), abs=1e-6)
    assert set(known) == {"a", "b"}
    assert tags.SHRINK == 20


def test_a_tag_rated_only_on_one_side_has_no_offset_on_the_other() -> None:
    known = offsets(RATED + rated("c", True, 0.0, 5))
    fail, fail_c = 15 / 25, (5 + 20 * 15 / 25) / 25
    assert known["c"] == pytest.approx((logit(fail_c) - logit(fail), 0.0), abs=1e-6)


def test_a_part_rating_counts_that_much_of_a_failure() -> None:
    known = offsets(rated("a", True, 0.25, 20) + rated("b", True, 0.75, 20))
    # Global failure rate 0.5; a failed 0.75 of each answer.
    assert known["a"][0] == pytest.approx(logit((15 + 10) / 40), abs=1e-6)


def test_the_offsets_of_a_prompts_tags_add_up_and_unseen_tags_weigh_nothing() -> None:
    known = {"a": (0.5, 0.25), "b": (-1.0, 0.125)}
    assert offset(known, ()) == 0.0
    assert offset(known, ("unseen",)) == 0.0
    assert offset(known, ("a",)) == 0.75
    assert offset(known, ("a", "b", "unseen")) == pytest.approx(-0.125)
    assert tags.failure_offset(known, ("a", "b", "unseen")) == pytest.approx(-0.5)


@pytest.fixture(scope="module")
def base() -> dict:
    examples = [training.Example(p, 0.0) for p in EASY] + [training.Example(p, 1.0) for p in HARD]
    return train(examples * 10, TrainingOptions(hash_bits=10, calibration_folds=1))


def test_a_refit_needs_ratings(base: dict) -> None:
    with pytest.raises(ValueError, match="no rated rows"):
        refit(base, [])


def test_a_refit_weighs_the_prior_and_learns_what_the_ratings_say(base: dict) -> None:
    # The base thinks EASY easy; this traffic's ratings say the cheapest rung fails them.
    ratings = [Rated(p, ("faq",), True, 0.0) for p in EASY] * 8
    ratings += [Rated(p, (), True, 1.0) for p in HARD] * 8
    document = refit(base, ratings)
    scorer, prior = LearnedScorer(document), LearnedScorer(base)
    assert document["prior"] is base and document["refit"] == {"cheapest": 48, "above": 0}
    assert document["label"] == training.LABELS["weak-fails"]
    assert "training" not in document and document["model"]["hash_bits"] == 10
    # The ratings turn the order round; the prior alone keeps it.
    assert min(scorer.difficulty(p, None, ("faq",)) for p in EASY) > max(
        scorer.difficulty(p) for p in HARD
    )
    assert min(prior.difficulty(p) for p in HARD) > max(prior.difficulty(p) for p in EASY)
    # Thresholds are calibrated on the rated prompts' difficulties.
    scores = [scorer.difficulty(r.prompt, None, r.tags) for r in ratings]
    shares = LearnedScorer(base).calibration.strong_shares
    assert document["calibration"] == Calibration.fit(scores, shares).to_json()
    assert document["calibration"] != base["calibration"]


def test_a_refit_without_answers_of_the_cheapest_rung_is_its_prior_plus_the_tags(
    base: dict,
) -> None:
    ratings = [Rated(p, ("hard-kind",), False, 0.0) for p in HARD] * 3
    ratings += [Rated(p, ("easy-kind",), False, 1.0) for p in EASY] * 3
    scorer, prior = LearnedScorer(refit(base, ratings)), LearnedScorer(base)
    known = offsets(ratings)
    for prompt in HARD + EASY:
        assert scorer.logit(prompt) == pytest.approx(prior.logit(prompt), abs=1e-3)
        assert scorer.logit(prompt, None, ("easy-kind",)) == pytest.approx(
            prior.logit(prompt) + sum(known["easy-kind"]), abs=1e-3
        )
    # Going up pays where the upper rungs succeed.
    assert sum(known["easy-kind"]) > 0 > sum(known["hard-kind"])


def test_ratings_the_prior_separates_perfectly_give_a_finite_weight(base: dict) -> None:
    ratings = [Rated(p, (), True, 1.0) for p in EASY] * 5
    ratings += [Rated(p, (), True, 0.0) for p in HARD] * 5
    model = refit(base, ratings)["model"]
    assert 0 < model["prior_weight"] < 1
    assert abs(model["intercept"]) < 1


def test_smoothed_targets_are_platts() -> None:
    rows = [training.Encoded([], [], 1.0, prior=2.0)] * 3 + [training.Encoded([], [], 0.0)]
    assert training._smoothed(rows) == [(2.0, 0.8)] * 3 + [(0.0, 1 / 3)]


def test_the_ridge_holds_the_weight_where_the_ratings_cannot_tell() -> None:
    # Every prompt the same score, every rating the same: scale and shift are one unknown.
    pairs = [(1.0, 0.9)] * 10
    scale, shift = training._platt(pairs, None, ridge=1.0)
    assert scale + shift == pytest.approx(logit(0.9), abs=0.5)
    assert 1 < scale < logit(0.9) and 0 < shift < scale
    assert training._platt([(0.0, 0.5), (1.0, 0.5)]) == pytest.approx((0.0, 0.0), abs=1e-6)


def test_a_rate_of_all_or_nothing_stays_finite() -> None:
    # Every cheapest answer failed, every upper one succeeded: global rates of 1.
    known = offsets(rated("a", True, 0.0, 5) + rated("a", False, 1.0, 5))
    assert known == {"a": (0.0, 0.0)}
