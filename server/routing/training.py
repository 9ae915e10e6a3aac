"""Trains a `LearnedScorer` from labelled outcomes and writes its JSON model file.

    python -m server.routing.training --csv OUTCOMES.csv [--csv ...] \
        [--exclude CONTAMINATED.jsonl ...] [--feedback FEEDBACK.csv] --out MODEL.json

Each CSV has a `prompt` column and one correctness (True/False) or score column per model;
`--weak` and `--strong` name the two columns. A feedback CSV has `prompt` and `score` columns:
the score of the cheaper model's answer. The model is logistic regression, fitted with
AdaGrad in plain Python, and the file also carries each profile's threshold, set so that
the profile's target share of the training prompts goes to the stronger tier.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import shlex
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from server.routing import features, tags, text
from server.routing.calibration import DEFAULT_STRONG_SHARES, Calibration
from server.routing.features import FeatureScorer, sigmoid
from server.routing.live import auc
from server.routing.outcomes import (
    LABELS,
    STRONG_MODEL,
    WEAK_MODEL,
    Example,
    Label,
    examples_from_feedback,
    examples_from_outcomes,
    read_contaminated,
    read_outcomes,
    success_rates,
)
from server.routing.scorer import (
    MODEL_FORMAT,
    NO_ENSEMBLE,
    LearnedScorer,
    pack_weights,
)
from server.routing.tags import Rated


@dataclass(frozen=True)
class TrainingOptions:
    """Hyper-parameters; the defaults are the ones the shipped model was trained with."""

    hash_bits: int = 15
    epochs: int = 3
    learning_rate: float = 0.05
    l2: float = 1e-4
    seed: int = 0
    # Thresholds are set on out-of-fold scores: in-sample scores of the final model spread
    # wider than the scores it gives to prompts it has never seen.
    calibration_folds: int = 3
    strong_shares: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_STRONG_SHARES))
    # What a prompt's target means (see `server.routing.outcomes.LABELS`).
    label: Label = "strong-only"
    # The served log-odds: learned_weight * fitted + feature_weight * hand-set prior.
    # Chosen on leave-one-benchmark-out transfer (docs/routing-transfer.md).
    learned_weight: float = 1.0
    feature_weight: float = 1.0


@dataclass(frozen=True)
class Encoded:
    """A training example as the model sees it: hash buckets, feature values, target."""

    buckets: list[int]
    values: list[float]
    target: float
    # Log-odds the fit takes as given: what the prompt's tags say.
    offset: float = 0.0
    # A prior scorer's log-odds, which the fit weighs (from 1) beside its own.
    prior: float = 0.0


def encode(examples: Iterable[Example], bits: int) -> list[Encoded]:
    """Encodes examples once, so that several fits (cross-validation) can share the work."""
    return [
        Encoded(text.buckets(e.prompt, bits), features.extract(e.prompt, e.max_tokens), e.target)
        for e in examples
    ]


def _standardisation(rows: Sequence[Encoded]) -> tuple[list[float], list[float]]:
    count = len(features.FEATURE_NAMES)
    means = [sum(r.values[i] for r in rows) / len(rows) for i in range(count)]
    scales = []
    for i in range(count):
        variance = sum((r.values[i] - means[i]) ** 2 for r in rows) / len(rows)
        scales.append(math.sqrt(variance) if variance > 1e-12 else 1.0)
    return means, scales


def _fit(rows: Sequence[Encoded], options: TrainingOptions) -> dict[str, Any]:
    """AdaGrad on the logistic loss, from zero weights; L2 is applied to the weights an
    example touches. A row's `offset` is added as given; its `prior` (a prior scorer's
    log-odds) is weighed, from 1 and drawn back toward 1, when any row has one."""
    means, scales = _standardisation(rows)
    size = 1 << options.hash_bits
    bucket_w = [0.0] * size
    feature_w = [0.0] * len(means)
    prior = min(0.99, max(0.01, sum(r.target for r in rows) / len(rows)))
    bias = math.log(prior / (1 - prior))
    standardised = [
        [(v - m) / s for v, m, s in zip(r.values, means, scales, strict=True)] for r in rows
    ]
    bucket_g = [1e-8] * size
    feature_g = [1e-8] * len(means)
    bias_g = 1e-8
    weighs_prior = any(r.prior for r in rows)
    prior_w = 1.0
    prior_g = 1e-8
    rate, l2 = options.learning_rate, options.l2
    order = list(range(len(rows)))
    shuffler = random.Random(options.seed)
    for _ in range(options.epochs):
        shuffler.shuffle(order)
        for index in order:
            row = rows[index]
            values = standardised[index]
            scale = 1.0 / math.sqrt(len(row.buckets)) if row.buckets else 0.0
            z = bias + scale * sum(bucket_w[i] for i in row.buckets) + row.offset
            z += sum(w * v for w, v in zip(feature_w, values, strict=True))
            z = max(-30.0, min(30.0, z + prior_w * row.prior))
            error = 1.0 / (1.0 + math.exp(-z)) - row.target
            bias_g += error * error
            bias -= rate * error / math.sqrt(bias_g)
            if weighs_prior:
                g = error * row.prior + l2 * (prior_w - 1.0)
                prior_g += g * g
                prior_w -= rate * g / math.sqrt(prior_g)
            step = error * scale
            for i in row.buckets:
                g = step + l2 * bucket_w[i]
                bucket_g[i] += g * g
                bucket_w[i] -= rate * g / math.sqrt(bucket_g[i])
            for j, v in enumerate(values):
                g = error * v + l2 * feature_w[j]
                feature_g[j] += g * g
                feature_w[j] -= rate * g / math.sqrt(feature_g[j])
    fitted: dict[str, Any] = {"prior_weight": round(prior_w, 6)} if weighs_prior else {}
    return fitted | {
        "hash_bits": size.bit_length() - 1,
        "intercept": round(bias, 6),
        "features": {
            name: {"weight": round(w, 6), "mean": round(m, 6), "scale": round(s, 6)}
            for name, w, m, s in zip(features.FEATURE_NAMES, feature_w, means, scales, strict=True)
        },
        "bucket_weights_f16": pack_weights(bucket_w),
        "ensemble": {
            "learned_weight": options.learned_weight,
            "feature_weight": options.feature_weight,
        },
    }


def _document(
    model: dict[str, Any], rows: Sequence[Encoded], options: TrainingOptions
) -> dict[str, Any]:
    return {
        "format": MODEL_FORMAT,
        "source": "",
        "command": "",
        "label": LABELS[options.label],
        "text": {"head_chars": text.HEAD_CHARS, "tail_chars": text.TAIL_CHARS},
        "model": model,
        "calibration": Calibration.fit([0.0], options.strong_shares).to_json(),
        "training": {
            "rows": len(rows),
            "positive_share": round(sum(r.target for r in rows) / len(rows), 6),
            "epochs": options.epochs,
            "learning_rate": options.learning_rate,
            "l2": options.l2,
            "seed": options.seed,
            "calibration_folds": options.calibration_folds,
            "label": options.label,
        },
    }


def _out_of_fold_logits(
    rows: Sequence[Encoded], options: TrainingOptions
) -> list[tuple[float, float]]:
    """(log-odds, target) of every row, each scored by a model that never saw it."""
    folds = options.calibration_folds
    pairs: list[tuple[float, float]] = []
    for fold in range(folds):
        held_out = rows[fold::folds]
        kept = [r for i, r in enumerate(rows) if i % folds != fold]
        scorer = LearnedScorer(_document(_fit(kept, options), kept, options))
        pairs.extend((scorer.logit_of(r.buckets, r.values), r.target) for r in held_out)
    return pairs


def _platt(
    pairs: Sequence[tuple[float, float]],
    offsets: Sequence[float] | None = None,
    ridge: float = 0.0,
) -> tuple[float, float]:
    """Scale and shift that turn log-odds into calibrated ones (Newton's method on the
    logistic loss of sigmoid(scale * z + shift + offset) against the targets). `ridge`
    draws them toward 1 and 0: a few ratings of near-equal prompts cannot tell the two
    apart, and would send both far off."""
    scale, shift = 1.0, 0.0
    offsets = offsets or [0.0] * len(pairs)
    for _ in range(25):
        g_a, g_b = ridge * (scale - 1.0), ridge * shift
        h_aa = h_bb = ridge
        h_ab = 0.0
        for (z, y), o in zip(pairs, offsets, strict=True):
            p = sigmoid(scale * z + shift + o)
            w = max(p * (1 - p), 1e-9)
            g_a += (p - y) * z
            g_b += p - y
            h_aa += w * z * z
            h_ab += w * z
            h_bb += w
        det = h_aa * h_bb - h_ab * h_ab
        if abs(det) < 1e-12:
            break
        # At most 1 a step: where the scores saturate the Hessian vanishes, and an
        # undamped step would throw the scale far past the optimum.
        step_a = max(-1.0, min(1.0, (h_bb * g_a - h_ab * g_b) / det))
        step_b = max(-1.0, min(1.0, (h_aa * g_b - h_ab * g_a) / det))
        scale, shift = scale - step_a, shift - step_b
        if abs(step_a) + abs(step_b) < 1e-7:
            break
    return scale, shift


def train_encoded(
    rows: Sequence[Encoded], options: TrainingOptions | None = None
) -> dict[str, Any]:
    """Fits and calibrates a model on encoded rows; returns its JSON document.

    An ensemble's summed log-odds count the base rate twice; a scale and shift fitted on
    scores of prompts the model never saw turn them back into a probability."""
    options = options or TrainingOptions()
    if not rows:
        raise ValueError("no training examples")
    document = _document(_fit(rows, options), rows, options)
    if options.calibration_folds > 1 and len(rows) >= 10 * options.calibration_folds:
        pairs = _out_of_fold_logits(rows, options)
    else:
        scorer = LearnedScorer(document)
        pairs = [(scorer.logit_of(r.buckets, r.values), r.target) for r in rows]
    scale, shift = _platt(pairs) if options.feature_weight else (1.0, 0.0)
    document["model"]["ensemble"].update(scale=round(scale, 6), shift=round(shift, 6))
    scores = [sigmoid(scale * z + shift) for z, _ in pairs]
    document["calibration"] = Calibration.fit(scores, options.strong_shares).to_json()
    return document


def train(
    examples: Iterable[Example],
    options: TrainingOptions | None = None,
    *,
    source: str = "",
    command: str = "",
) -> dict[str, Any]:
    """Fits a model on `examples` and returns its JSON document (see `LearnedScorer`).

    The document also carries the thresholds the feature scorer needs on the same prompts.
    """
    options = options or TrainingOptions()
    chosen = list(examples)
    document = train_encoded(encode(chosen, options.hash_bits), options)
    document["source"] = source
    document["command"] = command
    feature_scorer = FeatureScorer()
    feature_scores = [feature_scorer.difficulty(e.prompt, e.max_tokens) for e in chosen]
    document["feature_calibration"] = Calibration.fit(
        feature_scores, options.strong_shares
    ).to_json()
    return document


# A refit fits a few hundred rated prompts on top of a prior fitted on thousands: a
# smaller rate than a fresh fit's keeps the prompt model from chasing their noise
# (bench/routing_transfer's learning from traffic: 0.02 reaches a fresh fit's figure
# on the same rows, 0.05 falls 0.02-0.03 short).
REFIT_LEARNING_RATE = 0.02
# Pseudo-ratings that hold the prior's weight at 1 until the ratings say otherwise.
PLATT_RIDGE = 1.0


def refit(
    base: dict[str, Any], rated: Sequence[Rated], options: TrainingOptions | None = None
) -> dict[str, Any]:
    """A scorer fitted anew on every rated answer, with the model `base` (the configured
    one, fitted on the shipped data) as its prior: its log-odds enter the fit weighed by
    how well they order the ratings (a Platt fit, drawn toward 1 and 0), a weight the
    fit then moves further.

    The ratings of the cheapest rung's answers train the prompt model (a rating below 1
    says it fell short); every rating, of any rung, counts toward its tags' estimates
    (`server.routing.tags`), which the fit takes as given. How much the prompt's log-odds
    weigh beside the tags' is chosen on the ratings (`weights`). Thresholds are
    recalibrated on the rated prompts; priors, the feature scorer's calibration and
    credit are kept."""
    if not rated:
        raise ValueError("no rated rows")
    refitted = _refitted(base, rated, options)
    refitted["weights"] = {"prompt": prompt_weight(base, rated, options)}
    scorer = LearnedScorer(refitted | {"calibration": base["calibration"]})
    scores = [sigmoid(scorer.logit(r.prompt, None, r.tags)) for r in rated]
    shares = Calibration.from_json(base["calibration"]).strong_shares
    refitted["calibration"] = Calibration.fit(scores, shares).to_json()
    return refitted


def _refitted(
    base: dict[str, Any], rated: Sequence[Rated], options: TrainingOptions | None
) -> dict[str, Any]:
    """The refit's two parts, the prompt model and the tags' offsets, without weights
    or thresholds."""
    prior = LearnedScorer(base)
    known = tags.offsets(rated)
    rows = []
    for row in rated:
        if row.cheapest:
            found = text.buckets(row.prompt, prior.bits)
            values = features.extract(row.prompt, None)
            rows.append(Encoded(
                found, values, 1.0 - min(1.0, max(0.0, row.score)),
                offset=tags.failure_offset(known, row.tags), prior=prior.logit_of(found, values),
            ))  # fmt: skip
    options = replace(
        options or TrainingOptions(learning_rate=REFIT_LEARNING_RATE),
        hash_bits=prior.bits, label="weak-fails", learned_weight=1.0, feature_weight=0.0,
    )  # fmt: skip
    refitted = {k: v for k, v in base.items() if k not in ("model", "calibration", "training")}
    refitted |= {
        "label": LABELS["weak-fails"],
        "prior": base,
        "tags": {"shrink": tags.SHRINK, "offsets": {t: list(o) for t, o in known.items()}},
        "refit": {"cheapest": len(rows), "above": len(rated) - len(rows)},
    }
    if rows:
        # How far the prior's log-odds carry to this traffic, beside its tags: the fit
        # starts from that weight instead of 1.
        weight, shift = _platt(_smoothed(rows), [r.offset for r in rows], PLATT_RIDGE)
        model = _fit([replace(r, prior=weight * r.prior + shift) for r in rows], options)
        # The fitted weight w scaled the shifted prior: w * (weight * prior + shift).
        fitted = model.pop("prior_weight", 1.0)
        model["prior_weight"] = round(fitted * weight, 6)
        model["intercept"] = round(model["intercept"] + fitted * shift, 6)
        refitted["model"] = model
    else:  # no answer of the cheapest rung rated: the prior as it is, and the tags
        refitted["model"] = _unchanged(prior.bits)
    return refitted


# The weights a refit may give the prompt's log-odds beside the tags' (1), the first
# the one it keeps when the ratings cannot tell them apart. A prompt scorer trained on
# other traffic may order this traffic's kinds the wrong way round, which its tags then
# correct only where the prompt's own part weighs little (docs/routing-transfer.md:
# traffic mixing MMLU's subjects); it never weighs nothing, so that untagged prompts and
# prompts of one tag keep an order.
PROMPT_WEIGHTS = (1.0, 0.5, 0.25, 0.1)
# The ratings are cut into this many folds to choose the weight on, and are not cut
# when fewer than MIN_CHOOSING.
WEIGHT_FOLDS = 5
MIN_CHOOSING = 100


def prompt_weight(
    base: dict[str, Any], rated: Sequence[Rated], options: TrainingOptions | None = None
) -> float:
    """The weight of the prompt's log-odds beside the tags' that routes `rated` best:
    each fold of the ratings scored by the parts refitted on the others, each weight
    judged by `gain` on every fold's scores. 1 below MIN_CHOOSING ratings."""
    if len(rated) < MIN_CHOOSING:
        return PROMPT_WEIGHTS[0]
    held: list[tuple[Rated, float, float]] = []
    for fold in range(WEIGHT_FOLDS):
        kept = [r for i, r in enumerate(rated) if i % WEIGHT_FOLDS != fold]
        scorer = LearnedScorer(
            _refitted(base, kept, options) | {"calibration": base["calibration"]}
        )
        held.extend(
            (r, scorer.logit(r.prompt), tags.offset(scorer.tag_offsets, r.tags))
            for r in rated[fold::WEIGHT_FOLDS]
        )
    figures = {
        weight: gain([(weight * prompt + tagged, r) for r, prompt, tagged in held])
        for weight in PROMPT_WEIGHTS
    }
    return max(PROMPT_WEIGHTS, key=lambda w: figures[w])


def gain(scored: Sequence[tuple[float, Rated]]) -> float:
    """How well scores route rated answers, from -1 to 1 (0: no better than chance):
    sending a prompt up gains where the cheapest rung fails and the upper rungs
    succeed, so a score should be higher on the cheapest rung's failures than on its
    successes, and higher on the upper rungs' successes than on their failures. The
    sum of the two AUCs' distances from chance; a rung without both kinds rated adds 0."""
    cheapest = [(score, 1.0 - r.score) for score, r in scored if r.cheapest]
    above = [(score, r.score) for score, r in scored if not r.cheapest]
    return auc(cheapest) - 0.5 + auc(above) - 0.5


def _smoothed(rows: Sequence[Encoded]) -> list[tuple[float, float]]:
    """(prior, target) with Platt's smoothed targets: (n+ + 1) / (n+ + 2) for a failure,
    1 / (n- + 2) for a success, so that ratings the prior separates perfectly give a
    finite weight."""
    positives = sum(r.target for r in rows)
    high = (positives + 1) / (positives + 2)
    low = 1 / (len(rows) - positives + 2)
    return [(r.prior, low + r.target * (high - low)) for r in rows]


def _unchanged(bits: int) -> dict[str, Any]:
    """A fitted part that adds nothing to its prior."""
    return {
        "prior_weight": 1.0,
        "hash_bits": bits,
        "intercept": 0.0,
        "features": {n: {"weight": 0.0, "mean": 0.0, "scale": 1.0} for n in features.FEATURE_NAMES},
        "bucket_weights_f16": pack_weights([0.0] * (1 << bits)),
        "ensemble": NO_ENSEMBLE,
    }


def _read_feedback(path: Path) -> list[tuple[str, float]]:
    with open(path, encoding="utf-8", newline="") as rows:
        return [(row["prompt"], float(row["score"])) for row in csv.DictReader(rows)]


def _parse_shares(values: Sequence[str]) -> dict[str, float]:
    shares = dict(DEFAULT_STRONG_SHARES)
    for value in values:
        profile, _, share = value.partition("=")
        shares[profile] = float(share)
    return shares


def main(
    argv: Sequence[str] | None = None,
    feedback: Sequence[tuple[str, float]] = (),
    prog: str = "python -m server.routing.training",
) -> int:
    """Trains from the command line's sources plus `feedback` rows (prompt, score of
    the cheaper model's answer), for instance read from the ledger."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        type=Path,
        help="a folder laid out like routing-eval: every *.csv in it is outcomes, "
        "every contaminated_prompts.jsonl lists prompts to drop",
    )
    parser.add_argument("--csv", action="append", default=[], type=Path, help="outcomes CSV")
    parser.add_argument(
        "--csv-dir",
        action="append",
        default=[],
        type=Path,
        help="a folder whose *.csv files (recursively) are outcomes",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        type=Path,
        help="JSONL of contaminated prompts (field eval_prompt) to drop",
    )
    parser.add_argument(
        "--feedback",
        action="append",
        default=[],
        type=Path,
        help="CSV of prompt,score feedback on the cheaper model's answers",
    )
    parser.add_argument("--weak", default=WEAK_MODEL, help="column of the cheaper model")
    parser.add_argument("--strong", default=STRONG_MODEL, help="column of the stronger model")
    parser.add_argument(
        "--share",
        action="append",
        default=[],
        metavar="PROFILE=SHARE",
        help="target strong share of a profile, e.g. balanced=0.45",
    )
    parser.add_argument(
        "--label",
        choices=sorted(LABELS),
        default=TrainingOptions.label,
        help="strong-only: the cheaper model fell short and the stronger did not (default); "
        "weak-fails: the cheaper model fell short",
    )
    parser.add_argument(
        "--feature-weight",
        type=float,
        default=TrainingOptions.feature_weight,
        help="weight of the hand-set feature prior in the served log-odds (0: fitted only)",
    )
    parser.add_argument(
        "--priors",
        action="store_true",
        help="store every model column's success rate as that model's quality prior",
    )
    parser.add_argument("--hash-bits", type=int, default=TrainingOptions.hash_bits)
    parser.add_argument("--epochs", type=int, default=TrainingOptions.epochs)
    parser.add_argument("--source", default="", help="credit for the training data")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    paths = list(args.csv)
    excludes = list(args.exclude)
    for folder in args.csv_dir:
        paths.extend(sorted(folder.rglob("*.csv")))
    for folder in args.data:
        paths.extend(sorted(folder.rglob("*.csv")))
        excludes.extend(sorted(folder.rglob("contaminated_prompts.jsonl")))
    contaminated = read_contaminated(excludes)
    outcomes = read_outcomes(paths, weak=args.weak, strong=args.strong, exclude=contaminated)
    examples = list(examples_from_outcomes(outcomes, args.label))
    for path in args.feedback:
        examples.extend(examples_from_feedback(_read_feedback(path)))
    examples.extend(examples_from_feedback(feedback))
    if not examples:
        parser.error("no training rows: give --data, --csv, --csv-dir or --feedback")
    options = TrainingOptions(
        hash_bits=args.hash_bits,
        epochs=args.epochs,
        strong_shares=_parse_shares(args.share),
        label=args.label,
        feature_weight=args.feature_weight,
    )
    command = shlex.join(
        ["python", "-m", "server.routing.training", *(sys.argv[1:] if argv is None else argv)]
    )
    document = train(examples, options, source=args.source, command=command)
    if args.priors:
        document["models"] = success_rates(paths, exclude=contaminated)
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"trained on {len(examples)} prompts; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
