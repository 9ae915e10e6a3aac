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

from server.routing import features, text
from server.routing.calibration import DEFAULT_STRONG_SHARES, Calibration
from server.routing.features import FeatureScorer, sigmoid
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
    unpack_weights,
)


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


def _fit(
    rows: Sequence[Encoded], options: TrainingOptions, start: dict[str, Any] | None = None
) -> dict[str, Any]:
    """AdaGrad on the logistic loss; L2 is applied to the weights an example touches.
    With `start` (a model's "model" entry) the fit continues from its weights and keeps
    its standardisation: new rows adjust the model instead of replacing it."""
    if start is None:
        means, scales = _standardisation(rows)
        size = 1 << options.hash_bits
        bucket_w = [0.0] * size
        feature_w = [0.0] * len(means)
        prior = min(0.99, max(0.01, sum(r.target for r in rows) / len(rows)))
        bias = math.log(prior / (1 - prior))
    else:
        specs = [start["features"][name] for name in features.FEATURE_NAMES]
        means = [float(f["mean"]) for f in specs]
        scales = [float(f["scale"]) for f in specs]
        feature_w = [float(f["weight"]) for f in specs]
        bucket_w = list(unpack_weights(start["bucket_weights_f16"]))
        size = len(bucket_w)
        bias = float(start["intercept"])
    standardised = [
        [(v - m) / s for v, m, s in zip(r.values, means, scales, strict=True)] for r in rows
    ]
    bucket_g = [1e-8] * size
    feature_g = [1e-8] * len(means)
    bias_g = 1e-8
    rate, l2 = options.learning_rate, options.l2
    order = list(range(len(rows)))
    shuffler = random.Random(options.seed)
    for _ in range(options.epochs):
        shuffler.shuffle(order)
        for index in order:
            row = rows[index]
            values = standardised[index]
            scale = 1.0 / math.sqrt(len(row.buckets)) if row.buckets else 0.0
            z = bias + scale * sum(bucket_w[i] for i in row.buckets)
            z += sum(w * v for w, v in zip(feature_w, values, strict=True))
            z = max(-30.0, min(30.0, z))
            error = 1.0 / (1.0 + math.exp(-z)) - row.target
            bias_g += error * error
            bias -= rate * error / math.sqrt(bias_g)
            step = error * scale
            for i in row.buckets:
                g = step + l2 * bucket_w[i]
                bucket_g[i] += g * g
                bucket_w[i] -= rate * g / math.sqrt(bucket_g[i])
            for j, v in enumerate(values):
                g = error * v + l2 * feature_w[j]
                feature_g[j] += g * g
                feature_w[j] -= rate * g / math.sqrt(feature_g[j])
    return {
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


def _scores(scorer: LearnedScorer, rows: Sequence[Encoded]) -> list[float]:
    return [sigmoid(scorer.logit_of(r.buckets, r.values)) for r in rows]


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


def _platt(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Scale and shift that turn log-odds into calibrated ones (Newton's method on the
    logistic loss of sigmoid(scale * z + shift) against the targets)."""
    scale, shift = 1.0, 0.0
    for _ in range(25):
        g_a = g_b = h_aa = h_ab = h_bb = 0.0
        for z, y in pairs:
            p = sigmoid(scale * z + shift)
            w = max(p * (1 - p), 1e-9)
            g_a += (p - y) * z
            g_b += p - y
            h_aa += w * z * z
            h_ab += w * z
            h_bb += w
        det = h_aa * h_bb - h_ab * h_ab
        if abs(det) < 1e-12:
            break
        step_a = (h_bb * g_a - h_ab * g_b) / det
        step_b = (h_aa * g_b - h_ab * g_a) / det
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


# Smaller steps than a fresh fit: a few hundred rated prompts nudge a model trained on
# thousands instead of overwriting it (bench/routing_transfer's feedback stream).
REFIT_LEARNING_RATE = 0.01


def refit(
    document: dict[str, Any], examples: Iterable[Example], options: TrainingOptions | None = None
) -> dict[str, Any]:
    """A copy of the model `document` trained further on `examples` (feedback, say) and
    recalibrated on their scores; its priors, ensemble weights and credit are kept."""
    chosen = list(examples)
    if not chosen:
        raise ValueError("no training examples")
    start = document["model"]
    ensemble = start.get("ensemble") or NO_ENSEMBLE
    options = replace(
        options or TrainingOptions(learning_rate=REFIT_LEARNING_RATE),
        hash_bits=int(start["hash_bits"]),
        learned_weight=float(ensemble["learned_weight"]),
        feature_weight=float(ensemble["feature_weight"]),
    )
    rows = encode(chosen, options.hash_bits)
    refitted = dict(document)
    refitted["model"] = _fit(rows, options, start)
    # The probability rescale fitted with the model holds for the refitted one too.
    refitted["model"]["ensemble"].update(
        scale=float(ensemble.get("scale", 1.0)), shift=float(ensemble.get("shift", 0.0))
    )
    scores = _scores(LearnedScorer(refitted), rows)
    shares = Calibration.from_json(document["calibration"]).strong_shares
    refitted["calibration"] = Calibration.fit(scores, shares).to_json()
    refitted["refitted_on"] = int(document.get("refitted_on", 0)) + len(rows)
    return refitted


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
