"""Offline evaluation of the prompt-difficulty scorers on RouteLLM's MMLU and GSM8K outcomes.

Reads the data where it lives (`../shared/routing-eval` beside the repository, never a copy),
runs 5-fold cross-validation on MMLU, on GSM8K and on both, then trains on one benchmark and
tests on the other (at the trained thresholds and with live calibration), and times the
decisions. Writes
docs/routing-eval.md and bench/results/routing_eval.json.

Run: python -m bench.routing_eval [--data ../shared/routing-eval] [--folds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import routing_metrics as metrics
from server.base.config import PROFILES
from server.base.tokens import estimate
from server.routing.calibration import Calibration
from server.routing.features import FeatureScorer, sigmoid
from server.routing.live import LiveCalibration
from server.routing.outcomes import (
    Outcome,
    examples_from_outcomes,
    read_contaminated,
    read_outcomes,
)
from server.routing.scorer import LearnedScorer
from server.routing.training import Encoded, TrainingOptions, encode, train_encoded

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "routing-eval"
# The RouteLLM paper's prices for the pair, dollars per million tokens.
STRONG_PRICE = 24.7
WEAK_PRICE = 0.24
# An MMLU answer is a single letter.
MMLU_OUTPUT_TOKENS = 1


@dataclass
class Dataset:
    name: str
    outcomes: list[Outcome]
    encoded: list[Encoded]
    feature_scores: list[float]

    def subset(self, indexes: Sequence[int]) -> Dataset:
        return Dataset(
            self.name,
            [self.outcomes[i] for i in indexes],
            [self.encoded[i] for i in indexes],
            [self.feature_scores[i] for i in indexes],
        )

    def __add__(self, other: Dataset) -> Dataset:
        return Dataset(
            f"{self.name}+{other.name}",
            self.outcomes + other.outcomes,
            self.encoded + other.encoded,
            self.feature_scores + other.feature_scores,
        )


def load(data: Path, options: TrainingOptions) -> dict[str, Dataset]:
    sets = {
        "mmlu": read_outcomes(
            sorted((data / "mmlu" / "responses").glob("*.csv")),
            exclude=read_contaminated([data / "mmlu" / "contaminated_prompts.jsonl"]),
        ),
        "gsm8k": read_outcomes(
            [data / "gsm8k" / "gsm8k_responses.csv"],
            exclude=read_contaminated([data / "gsm8k" / "contaminated_prompts.jsonl"]),
        ),
    }
    features = FeatureScorer()
    return {
        name: Dataset(
            name,
            outcomes,
            encode(examples_from_outcomes(outcomes), options.hash_bits),
            [features.difficulty(o.prompt) for o in outcomes],
        )
        for name, outcomes in sets.items()
    }


def _cost(outcome: Outcome, strong: bool) -> float:
    prompt_tokens = estimate(outcome.prompt)
    if strong:
        output = (
            estimate(outcome.strong_response) if outcome.strong_response else MMLU_OUTPUT_TOKENS
        )
        return (prompt_tokens + output) * STRONG_PRICE / 1e6
    output = estimate(outcome.weak_response) if outcome.weak_response else MMLU_OUTPUT_TOKENS
    return (prompt_tokens + output) * WEAK_PRICE / 1e6


def operating_point(outcomes: Sequence[Outcome], to_strong: Sequence[bool]) -> dict[str, float]:
    """Realised strong share, quality, quality kept and cost saved against always-strong."""
    n = len(outcomes)
    r_weak = sum(o.weak for o in outcomes) / n
    r_strong = sum(o.strong for o in outcomes) / n
    share = sum(to_strong) / n
    quality = sum(o.strong if s else o.weak for o, s in zip(outcomes, to_strong, strict=True)) / n
    cost = sum(_cost(o, s) for o, s in zip(outcomes, to_strong, strict=True))
    strong_cost = sum(_cost(o, True) for o in outcomes)
    return {
        "strong_share": share,
        "quality": quality,
        "quality_kept": quality / r_strong,
        "cost_saved": 1 - cost / strong_cost,
        "random_quality_kept": (r_weak + share * (r_strong - r_weak)) / r_strong,
    }


def _curve_summary(scores: Sequence[float], outcomes: Sequence[Outcome]) -> dict[str, float]:
    return metrics.summary(scores, [o.weak for o in outcomes], [o.strong for o in outcomes])


def _baselines(outcomes: Sequence[Outcome]) -> dict[str, dict[str, float]]:
    n = len(outcomes)
    r_weak = sum(o.weak for o in outcomes) / n
    r_strong = sum(o.strong for o in outcomes) / n
    share_95 = max(0.0, (0.95 * r_strong - r_weak) / (r_strong - r_weak))
    return {
        "always_weak": operating_point(outcomes, [False] * n),
        "always_strong": operating_point(outcomes, [True] * n),
        "random": {"apgr": 0.5, "cpt50": 0.5, "cpt80": 0.8, "share_for_95": min(1.0, share_95)},
        "length": _curve_summary([len(o.prompt) for o in outcomes], outcomes),
        "oracle": _curve_summary([o.strong - o.weak for o in outcomes], outcomes),
    }


def _profiles(
    scores: Sequence[float], calibration: Calibration, outcomes: Sequence[Outcome]
) -> dict[str, dict[str, float]]:
    points = {}
    for profile in PROFILES:
        point = operating_point(outcomes, [calibration.wants_strong(profile, s) for s in scores])
        point["calibrated_share"] = calibration.strong_shares[profile]
        points[profile] = point
    return points


def _evaluate(
    train: Dataset, test: Dataset, options: TrainingOptions
) -> tuple[dict[str, Any], LearnedScorer]:
    scorer = LearnedScorer(train_encoded(train.encoded, options))
    learned = [sigmoid(scorer.logit_of(e.buckets, e.values)) for e in test.encoded]
    feature_calibration = Calibration.fit(train.feature_scores, options.strong_shares)
    result = {
        "learned": {
            **_curve_summary(learned, test.outcomes),
            "profiles": _profiles(learned, scorer.calibration, test.outcomes),
        },
        "feature": {
            **_curve_summary(test.feature_scores, test.outcomes),
            "profiles": _profiles(test.feature_scores, feature_calibration, test.outcomes),
        },
    }
    return result, scorer


def _mean(results: Sequence[Any]) -> Any:
    """The element-wise mean of equally shaped nested dicts of numbers."""
    first = results[0]
    if isinstance(first, dict):
        return {k: _mean([r[k] for r in results]) for k in first}
    return statistics.fmean(results)


def cross_validate(dataset: Dataset, folds: int, options: TrainingOptions) -> dict[str, Any]:
    order = list(range(len(dataset.outcomes)))
    random.Random(0).shuffle(order)
    per_fold = []
    for fold in range(folds):
        test = dataset.subset(order[fold::folds])
        train = dataset.subset([i for j, i in enumerate(order) if j % folds != fold])
        result, _ = _evaluate(train, test, options)
        result["baselines"] = _baselines(test.outcomes)
        per_fold.append(result)
    return _mean(per_fold)


def cross_domain(train: Dataset, test: Dataset, options: TrainingOptions) -> dict[str, Any]:
    result, scorer = _evaluate(train, test, options)
    result["baselines"] = _baselines(test.outcomes)
    learned = [sigmoid(scorer.logit_of(e.buckets, e.values)) for e in test.encoded]
    # Traffic arrives in an arbitrary but fixed order; calibration decides before it learns.
    order = list(range(len(test.outcomes)))
    random.Random(1).shuffle(order)
    guard = LiveCalibration(scorer.calibration)
    decisions: dict[str, list[bool]] = {p: [] for p in PROFILES}
    guarded_scores = []
    for i in order:
        for profile in PROFILES:
            decisions[profile].append(
                guard.wants_strong(profile, learned[i], test.feature_scores[i])
            )
        guarded_scores.append(guard.difficulty(learned[i], test.feature_scores[i]))
        guard.observe(learned[i], test.feature_scores[i])
    ordered = [test.outcomes[i] for i in order]
    guarded = {}
    for profile in PROFILES:
        point = operating_point(ordered, decisions[profile])
        point["calibrated_share"] = scorer.calibration.strong_shares[profile]
        guarded[profile] = point
    blend = [0.5 * a + 0.5 * b for a, b in zip(learned, test.feature_scores, strict=True)]
    result["guarded"] = {
        **_curve_summary(guarded_scores, ordered),
        "blend_apgr": _curve_summary(blend, test.outcomes)["apgr"],
        "profiles": guarded,
        "drifting_at_end": guard.drifting,
    }
    return result


def decision_times(prompts: Sequence[str], scorer: LearnedScorer) -> dict[str, float]:
    """Per-prompt wall time of the learned scorer, and of the served path: both
    difficulties from one encoding under live calibration."""
    guard = LiveCalibration(scorer.calibration)

    def guarded(prompt: str) -> None:
        learned, feature = scorer.difficulties(prompt, None)
        guard.wants_strong("balanced", learned, feature)
        guard.observe(learned, feature)

    timings: dict[str, float] = {}
    runs: dict[str, Callable[[str], object]] = {
        "learned": lambda p: scorer.difficulty(p, None),
        "guarded": guarded,
    }
    # Wall time includes whatever else the machine runs; CPU time of this thread does not.
    clocks = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
    for name, run in runs.items():
        for clock_name, clock in clocks.items():
            samples = []
            for prompt in prompts:
                start = clock()
                run(prompt)
                samples.append((clock() - start) / 1e6)
            samples.sort()
            key = f"{name}_{clock_name}"
            timings[f"{key}_p50_ms"] = samples[len(samples) // 2]
            timings[f"{key}_p99_ms"] = samples[int(0.99 * (len(samples) - 1))]
            timings[f"{key}_max_ms"] = samples[-1]
    return timings


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def render(report: dict[str, Any], command: str) -> str:
    lines = [
        "# Routing evaluation",
        "",
        "Prompt-difficulty scorers on per-prompt outcomes of Mixtral-8x7B-Instruct (weak) and",
        "GPT-4-1106-preview (strong) on MMLU and GSM8K, from the RouteLLM project",
        "(lm-sys/RouteLLM, Apache-2.0), contaminated prompts dropped. Regenerate with:",
        "",
        f"    {command}",
        "",
        "APGR: area under the performance-gap-recovered curve (random 0.5, higher is better).",
        "CPT(x): strong share needed to recover x of the gap. 95% share: strong share needed to",
        "keep 95% of always-strong quality. Costs use $24.7/M (strong) and $0.24/M (weak)",
        "tokens, with tokens estimated from text length (GSM8K outputs from the responses).",
        "",
        "`learned` is the served difficulty: the shipped ensemble of the fitted model and the",
        "hand-set feature scorer, chosen on transfer to unseen benchmarks rather than on the",
        "in-domain figures below (which favour the fitted model alone); the evaluation on",
        "benchmarks and subjects left out of training is in [routing-transfer.md](routing-transfer.md).",
        "",
        f"## In-domain, {report['folds']}-fold cross-validation (means over folds)",
        "",
        "| data | router | APGR | CPT(50%) | CPT(80%) | 95% share |",
        "|---|---|---|---|---|---|",
    ]
    for name, result in report["in_domain"].items():
        rows = [("learned", result["learned"]), ("feature", result["feature"])]
        rows += [(b, result["baselines"][b]) for b in ("length", "random", "oracle")]
        for router, r in rows:
            lines.append(
                f"| {name} | {router} | {r['apgr']:.3f} | {_pct(r['cpt50'])} | "
                f"{_pct(r['cpt80'])} | {_pct(r['share_for_95'])} |"
            )
    lines += [
        "",
        "## Profiles at their calibrated points (in-domain, means over folds)",
        "",
        "| data | router | profile | calibrated share | realised share | quality kept | "
        "random at same share | cost saved |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, result in report["in_domain"].items():
        for router in ("learned", "feature"):
            for profile, p in result[router]["profiles"].items():
                lines.append(
                    f"| {name} | {router} | {profile} | {_pct(p['calibrated_share'])} | "
                    f"{_pct(p['strong_share'])} | {_pct(p['quality_kept'])} | "
                    f"{_pct(p['random_quality_kept'])} | {_pct(p['cost_saved'])} |"
                )
        for fixed in ("always_weak", "always_strong"):
            p = result["baselines"][fixed]
            lines.append(
                f"| {name} | {fixed.replace('_', '-')} | - | - | {_pct(p['strong_share'])} | "
                f"{_pct(p['quality_kept'])} | - | {_pct(p['cost_saved'])} |"
            )
    lines += [
        "",
        "## Across domains (train on one benchmark, test on the other)",
        "",
        "| train -> test | learned APGR | feature APGR | 50/50 blend APGR | live-calibrated APGR "
        "| length APGR |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in report["cross_domain"].items():
        lines.append(
            f"| {name} | {r['learned']['apgr']:.3f} | {r['feature']['apgr']:.3f} | "
            f"{r['guarded']['blend_apgr']:.3f} | {r['guarded']['apgr']:.3f} | "
            f"{r['baselines']['length']['apgr']:.3f} |"
        )
    lines += [
        "",
        "| train -> test | profile | calibrated share | realised, trained thresholds | quality kept "
        "| realised, live calibration | quality kept | cost saved |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["cross_domain"].items():
        for profile in PROFILES:
            plain = r["learned"]["profiles"][profile]
            guarded = r["guarded"]["profiles"][profile]
            lines.append(
                f"| {name} | {profile} | {_pct(plain['calibrated_share'])} | "
                f"{_pct(plain['strong_share'])} | {_pct(plain['quality_kept'])} | "
                f"{_pct(guarded['strong_share'])} | {_pct(guarded['quality_kept'])} | "
                f"{_pct(guarded['cost_saved'])} |"
            )
    t = report["decision_time"]
    lines += [
        "",
        "## Decision time per prompt (this machine, all prompts of both benchmarks)",
        "",
        "| path | clock | p50 | p99 | max |",
        "|---|---|---|---|---|",
    ]
    paths = {"learned": "learned scorer", "guarded": "learned + feature scorer + live calibration"}
    for key, label in paths.items():
        for clock in ("cpu", "wall"):
            lines.append(
                f"| {label} | {clock} | {t[f'{key}_{clock}_p50_ms']:.3f} ms | "
                f"{t[f'{key}_{clock}_p99_ms']:.3f} ms | {t[f'{key}_{clock}_max_ms']:.3f} ms |"
            )
    lines += [
        "",
        f"Load average while measuring: {report['load_average']:.1f} on {report['cpus']} CPUs; "
        "wall-clock tails include time the process waited for a CPU.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    options = TrainingOptions()
    started = time.monotonic()
    sets = load(args.data, options)
    both = sets["mmlu"] + sets["gsm8k"]
    report: dict[str, Any] = {"folds": args.folds, "options": {"hash_bits": options.hash_bits}}
    report["in_domain"] = {
        name: cross_validate(dataset, args.folds, options)
        for name, dataset in (("mmlu", sets["mmlu"]), ("gsm8k", sets["gsm8k"]), ("both", both))
    }
    report["cross_domain"] = {
        "mmlu -> gsm8k": cross_domain(sets["mmlu"], sets["gsm8k"], options),
        "gsm8k -> mmlu": cross_domain(sets["gsm8k"], sets["mmlu"], options),
    }
    scorer = LearnedScorer.load()
    report["decision_time"] = decision_times([o.prompt for o in both.outcomes], scorer)
    report["load_average"] = os.getloadavg()[0]
    report["cpus"] = os.cpu_count()
    report["seconds"] = time.monotonic() - started
    command = "python -m bench.routing_eval" + (f" --folds {args.folds}" if args.folds != 5 else "")
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "routing_eval.json").write_text(
        json.dumps(report, indent=1) + "\n", encoding="utf-8"
    )
    (ROOT / "docs").mkdir(exist_ok=True)
    (ROOT / "docs" / "routing-eval.md").write_text(render(report, command), encoding="utf-8")
    print(render(report, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
