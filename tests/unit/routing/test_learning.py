"""Learning from rated traffic: the tags' estimates and the refit from every rating."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from server.routing import features, tags, text, training
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
    # Shares other than the defaults, so that a refit's thresholds are seen to keep them.
    shares = {"economy": 0.1, "balanced": 0.3, "quality": 0.6}
    options = TrainingOptions(hash_bits=10, calibration_folds=1, strong_shares=shares)
    return train(examples * 10, options)


def test_a_refit_needs_ratings(base: dict) -> None:
    with pytest.raises(ValueError, match="^no rated rows$"):
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
    assert shares == {"economy": 0.1, "balanced": 0.3, "quality": 0.6}
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


def test_the_prompt_model_learns_only_what_the_tags_leave_unexplained(base: dict) -> None:
    # Prompts of kind a fail on the cheapest rung, of kind b pass: the tags' failure
    # offsets explain part of that, and the prompt model, fitted around them, the rest.
    ratings = [Rated(p, ("a",), True, 0.0) for p in EASY] * 8
    ratings += [Rated(p, ("b",), True, 1.0) for p in HARD] * 8
    tagged = LearnedScorer(refit(base, ratings))
    bare = LearnedScorer(refit(base, [Rated(r.prompt, (), True, r.score) for r in ratings]))

    def gap(scorer: LearnedScorer, a: tuple[str, ...] = (), b: tuple[str, ...] = ()) -> float:
        return (
            sum(scorer.logit(p, None, a) for p in EASY) / 3
            - sum(scorer.logit(p, None, b) for p in HARD) / 3
        )

    offset_gap = tagged.tag_offsets["a"][0] - tagged.tag_offsets["b"][0]
    assert offset_gap == pytest.approx(2 * logit((24 + 20 * 0.5) / 44), abs=1e-5)
    # Without its tags a prompt of either kind is told apart less than by a fit that
    # never saw tags; with them, about as far.
    assert gap(tagged) < gap(bare) - 0.5 * offset_gap
    assert gap(tagged, ("a",), ("b",)) == pytest.approx(gap(bare), abs=0.5 * offset_gap)


def test_the_refit_fits_around_the_prior_as_weighed_on_the_ratings(base: dict) -> None:
    # The base is sure of both kinds (log-odds beyond 18 either way); the ratings say the
    # cheapest rung fails 3 of 10 of the easy prompts and 7 of 10 of the hard ones.
    assert all(abs(LearnedScorer(base).logit(p)) > 18 for p in EASY + HARD)
    ratings = []
    for prompt, failures in [(p, 3) for p in EASY] + [(p, 7) for p in HARD]:
        ratings += [Rated(prompt, (), True, 0.0)] * failures
        ratings += [Rated(prompt, (), True, 1.0)] * (10 - failures)
    document = refit(base, ratings)
    scorer = LearnedScorer(document)
    for prompt in EASY:
        assert scorer.difficulty(prompt) == pytest.approx(0.3, abs=0.05)
    for prompt in HARD:
        assert scorer.difficulty(prompt) == pytest.approx(0.7, abs=0.05)
    # The prior carries at a small weight: its order, not its certainty.
    assert 0 < document["model"]["prior_weight"] < 0.1
    assert abs(document["model"]["intercept"]) < 0.1


def test_the_refits_fitted_values_are_the_fit_around_the_weighed_prior(base: dict) -> None:
    # Uneven rates (1 in 10 and 6 in 10), so that the prior's Platt shift is far from 0.
    ratings = []
    for prompt, failures in [(p, 1) for p in EASY] + [(p, 6) for p in HARD]:
        ratings += [Rated(prompt, ("k",), True, 0.0)] * failures
        ratings += [Rated(prompt, ("k",), True, 1.0)] * (10 - failures)
    ratings += [Rated(p, ("k",), False, 1.0) for p in HARD]
    document = refit(base, ratings)
    # What the refit is meant to be, step by step: the tags' failure offsets, the prior's
    # log-odds weighed and shifted by a Platt fit beside them, the fit around that.
    prior = LearnedScorer(base)
    known = offsets(ratings)
    rows = [
        training.Encoded(
            text.buckets(r.prompt, prior.bits),
            features.extract(r.prompt, None),
            1.0 - r.score,
            offset=known["k"][0],
            prior=prior.logit(r.prompt),
        )
        for r in ratings
        if r.cheapest
    ]
    weight, shift = training._platt(
        training._smoothed(rows), [r.offset for r in rows], training.PLATT_RIDGE
    )
    assert abs(shift) > 0.3
    options = TrainingOptions(
        learning_rate=training.REFIT_LEARNING_RATE, hash_bits=prior.bits, label="weak-fails",
        feature_weight=0.0,
    )  # fmt: skip
    model = training._fit(
        [dataclasses.replace(r, prior=weight * r.prior + shift) for r in rows], options
    )
    fitted = model.pop("prior_weight")
    model["prior_weight"] = round(fitted * weight, 6)
    model["intercept"] = round(model["intercept"] + fitted * shift, 6)
    assert document["model"] == model
    assert model["ensemble"] == {"learned_weight": 1.0, "feature_weight": 0.0}
    assert document["tags"] == {"shrink": 20, "offsets": {"k": list(known["k"])}}
    assert document["weights"] == {"prompt": 1.0}  # fewer than 100 ratings


def test_ratings_the_prior_separates_perfectly_give_a_finite_weight(base: dict) -> None:
    ratings = [Rated(p, (), True, 1.0) for p in EASY] * 5
    ratings += [Rated(p, (), True, 0.0) for p in HARD] * 5
    model = refit(base, ratings)["model"]
    assert 0 < model["prior_weight"] < 1
    assert abs(model["intercept"]) < 1


def kinds_the_prompt_scorer_orders_the_wrong_way(tagged: bool) -> list[Rated]:
    """HARD prompts fail on every rung (going up gains nothing), EASY ones fail on the
    cheapest rung half the time and pass above it (going up gains): the prompt scorer
    rightly finds HARD harder, which routes them the wrong way."""
    hopeless, worth = ("hopeless",) if tagged else (), ("worth",) if tagged else ()
    ratings = []
    for i in range(30):
        ratings += [
            Rated(HARD[i % 3], hopeless, True, 0.0),
            Rated(HARD[i % 3], hopeless, False, 0.0),
        ]
        ratings += [
            Rated(EASY[i % 3], worth, True, float(i % 2)),
            Rated(EASY[i % 3], worth, False, 1.0),
        ]
    random.Random(0).shuffle(ratings)
    return ratings


def test_the_prompt_weighs_less_where_the_tags_route_better(base: dict) -> None:
    ratings = kinds_the_prompt_scorer_orders_the_wrong_way(tagged=True)
    assert len(ratings) >= training.MIN_CHOOSING
    weight = training.prompt_weight(base, ratings)
    document = refit(base, ratings)
    scorer = LearnedScorer(document)
    assert weight < 1 and document["weights"] == {"prompt": weight}
    assert scorer.prompt_weight == weight
    assert min(scorer.logit(p, None, ("worth",)) for p in EASY) > max(
        scorer.logit(p, None, ("hopeless",)) for p in HARD
    )
    # The served log-odds: the prompt's weighed, the tags' added.
    unweighed = LearnedScorer(document | {"weights": {"prompt": 1.0}})
    for prompt in EASY + HARD:
        assert scorer.logit(prompt, None, ("worth",)) == pytest.approx(
            weight * unweighed.logit(prompt) + sum(scorer.tag_offsets["worth"]), abs=1e-9
        )


def test_the_prompt_keeps_its_weight_where_the_tags_tell_nothing(base: dict) -> None:
    ratings = kinds_the_prompt_scorer_orders_the_wrong_way(tagged=False)
    assert training.prompt_weight(base, ratings) == 1.0
    assert refit(base, ratings)["weights"] == {"prompt": 1.0}
    # Too few ratings to choose on: the prompt weighs fully.
    tagged = kinds_the_prompt_scorer_orders_the_wrong_way(tagged=True)
    assert training.prompt_weight(base, tagged[: training.MIN_CHOOSING - 1]) == 1.0
    assert training.MIN_CHOOSING == 100 and training.PROMPT_WEIGHTS[0] == 1.0


def test_gain_sums_how_well_scores_order_each_rungs_ratings() -> None:
    fails, passes = Rated("f", (), True, 0.0), Rated("p", (), True, 1.0)
    good, bad = Rated("g", (), False, 1.0), Rated("b", (), False, 0.0)
    assert training.gain([(1, fails), (0, passes), (1, good), (0, bad)]) == 1.0
    assert training.gain([(0, fails), (1, passes), (0, good), (1, bad)]) == -1.0
    assert training.gain([(1, fails), (0, passes), (0, good), (1, bad)]) == 0.0
    # Three of four pairs of the cheapest rung in order; above it, one kind only.
    scored = [(3, fails), (1, fails), (2, passes), (0, passes), (5, good)]
    assert training.gain(scored) == pytest.approx(0.25)
    # A half rating of the cheapest rung is not a failure; above it, not a success.
    half_cheap, half_up = Rated("h", (), True, 0.5), Rated("h", (), False, 0.5)
    assert training.gain([(0, half_cheap), (1, fails), (0, half_up), (1, good)]) == 1.0


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
