"""How the difficulty scorers transfer to traffic they never saw: leave-one-benchmark-out and
leave-subject-out APGR with bootstrap 95% intervals, next to in-domain cross-validation; live
calibration's realised shares on each unseen benchmark; and a simulated feedback stream.

Data: RouteLLM's MMLU and GSM8K outcomes (`--data`, ../shared/routing-eval); when
`--alpaca-eval` names a checkout of tatsu-lab/alpaca_eval, its open-ended chat prompts judged
against gpt-4-1106-preview for Mixtral-8x7B-Instruct-v0.1 (the same pair as RouteLLM's data);
when `--routerbench` names a checkout of shuhao02/RouterDC, RouterBench's outcomes of the same
pair on ARC-Challenge, MBPP and Winogrande. Nothing is copied into the project. Writes docs/routing-transfer.md and
bench/results/routing_transfer.json.

Run: python -m bench.routing_transfer [--alpaca-eval PATH] [--routerbench PATH] [--bootstrap 100]
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import os
import random
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import routing_metrics as metrics
from bench.routing_eval import DEFAULT_DATA
from server.base.config import PROFILES
from server.routing import features, text
from server.routing.features import FeatureScorer, sigmoid
from server.routing.live import LiveCalibration
from server.routing.outcomes import (
    Example,
    Label,
    Outcome,
    read_contaminated,
    read_outcomes,
    target,
)
from server.routing.scorer import LearnedScorer
from server.routing.training import Encoded, TrainingOptions, refit, train_encoded

ROOT = Path(__file__).resolve().parent.parent
ALPACA_MODEL = "Mixtral-8x7B-Instruct-v0.1"
ALPACA_ANNOTATOR = "alpaca_eval_gpt4_turbo_fn"
ROUTERBENCH = {"arc_challenge": "arc_challenge", "mbpp": "mbpp", "winogrande": "winograde"}
ROUTERBENCH_WEAK = "mistralai/mixtral-8x7b-chat"
ROUTERBENCH_STRONG = "gpt-4-1106-preview"


@dataclass(frozen=True)
class Row:
    benchmark: str
    subject: str
    outcome: Outcome
    buckets: list[int]
    values: list[float]


def load(data: Path, alpaca: Path | None, routerbench: Path | None, bits: int) -> list[Row]:
    found: list[tuple[str, str, Outcome]] = []
    mmlu_excluded = read_contaminated([data / "mmlu" / "contaminated_prompts.jsonl"])
    for path in sorted((data / "mmlu" / "responses").glob("*.csv")):
        subject = path.stem.removeprefix("mmlu_")
        found += [("mmlu", subject, o) for o in read_outcomes([path], exclude=mmlu_excluded)]
    gsm8k = read_outcomes(
        [data / "gsm8k" / "gsm8k_responses.csv"],
        exclude=read_contaminated([data / "gsm8k" / "contaminated_prompts.jsonl"]),
    )
    found += [("gsm8k", "gsm8k", o) for o in gsm8k]
    if alpaca is not None:
        found += [("alpaca_eval", source, o) for source, o in read_alpaca(alpaca)]
    if routerbench is not None:
        found += [(name, name, o) for name, o in read_routerbench(routerbench)]
    return [
        Row(b, s, o, text.buckets(o.prompt, bits), features.extract(o.prompt, None))
        for b, s, o in found
    ]


def read_alpaca(checkout: Path) -> list[tuple[str, Outcome]]:
    """AlpacaEval's judged pairs: the weak model's answer against gpt-4-1106-preview's.
    Weak scores 1 when the judge preferred it, the strong model (the reference) 1 always."""
    raw = _file(checkout, f"results/{ALPACA_MODEL}/{ALPACA_ANNOTATOR}/annotations.json")
    return [
        (r["dataset"], Outcome(r["instruction"], weak=float(r["preference"]) - 1.0, strong=1.0))
        for r in json.loads(raw)
        if r.get("preference") is not None
    ]


def read_routerbench(checkout: Path) -> list[tuple[str, Outcome]]:
    """RouterBench's outcomes (withmartian/routerbench, MIT) on ARC-Challenge, MBPP and
    Winogrande, as a checkout of shuhao02/RouterDC holds them: one CSV row per prompt (the
    prompt a Python list of its parts), a column of 0/1 per model. The same pair as
    RouteLLM's data: Mixtral-8x7B (`mistralai/mixtral-8x7b-chat`) and gpt-4-1106-preview."""
    found = []
    for name, stem in ROUTERBENCH.items():
        for split in ("train", "test"):
            raw = _file(checkout, f"datasets/routerbench_zs/{stem}_{split}.csv").decode()
            for row in csv.DictReader(io.StringIO(raw)):
                weak, strong = row[ROUTERBENCH_WEAK], row[ROUTERBENCH_STRONG]
                if weak and strong:
                    prompt = "\n\n".join(ast.literal_eval(row["prompt"]))
                    found.append((name, Outcome(prompt, weak=float(weak), strong=float(strong))))
    return found


def _file(checkout: Path, path: str) -> bytes:
    """A file of a checkout, or of a bare mirror's last commit."""
    if (checkout / path).exists():
        return (checkout / path).read_bytes()
    return subprocess.run(
        ["git", "-C", str(checkout), "show", f"HEAD:{path}"], capture_output=True, check=True
    ).stdout


# -- scorers ------------------------------------------------------------------------------


def encoded(rows: Sequence[Row], label: Label = "strong-only") -> list[Encoded]:
    return [Encoded(r.buckets, r.values, target(r.outcome, label)) for r in rows]


Scores = Callable[[Sequence[Row]], list[float]]


def fitted(train: Sequence[Row], label: Label, feature_weight: float) -> Scores:
    options = TrainingOptions(label=label, feature_weight=feature_weight, calibration_folds=1)
    scorer = LearnedScorer(train_encoded(encoded(train, label), options))
    return lambda test: [scorer.logit_of(r.buckets, r.values) for r in test]


def scorers(train: Sequence[Row]) -> dict[str, Scores]:
    hand = FeatureScorer()
    return {
        "ensemble, strong-only": fitted(train, "strong-only", 1.0),
        "ensemble, weak-fails": fitted(train, "weak-fails", 1.0),
        "fitted, strong-only": fitted(train, "strong-only", 0.0),
        "fitted, weak-fails": fitted(train, "weak-fails", 0.0),
        "hand-set features": lambda test: [hand.logit(r.values) for r in test],
        "length": lambda test: [float(len(r.outcome.prompt)) for r in test],
    }


# -- metrics ------------------------------------------------------------------------------


def apgr(scores: Sequence[float], test: Sequence[Row]) -> float:
    weak = [r.outcome.weak for r in test]
    strong = [r.outcome.strong for r in test]
    points = metrics.curve(scores, weak, strong)
    return metrics.apgr(points, sum(weak) / len(weak), sum(strong) / len(strong))


def interval(scores: Sequence[float], test: Sequence[Row], resamples: int) -> list[float]:
    """APGR and its bootstrap 95% interval (prompts resampled with replacement)."""
    rng = random.Random(0)
    n = len(test)
    values = []
    for _ in range(resamples):
        picks = [rng.randrange(n) for _ in range(n)]
        sample = [test[i] for i in picks]
        if len({r.outcome.weak for r in sample}) > 1 or len({r.outcome.strong for r in sample}) > 1:
            values.append(apgr([scores[i] for i in picks], sample))
    values.sort()
    low = values[int(0.025 * (len(values) - 1))]
    high = values[int(0.975 * (len(values) - 1))]
    return [round(apgr(scores, test), 4), round(low, 4), round(high, 4)]


def evaluate(train: Sequence[Row], test: Sequence[Row], resamples: int) -> dict[str, list[float]]:
    return {name: interval(run(test), test, resamples) for name, run in scorers(train).items()}


# -- splits -------------------------------------------------------------------------------


def leave_one_benchmark_out(rows: Sequence[Row], resamples: int) -> dict[str, Any]:
    out = {}
    for held in sorted({r.benchmark for r in rows}):
        train = [r for r in rows if r.benchmark != held]
        test = [r for r in rows if r.benchmark == held]
        out[held] = evaluate(train, test, resamples)
        print(f"leave out {held}: done", flush=True)
    return out


def leave_subjects_out(rows: Sequence[Row], resamples: int, groups: int = 5) -> dict[str, Any]:
    """MMLU's subjects in `groups` groups; each group held out while the rest trains."""
    subjects = sorted({r.subject for r in rows if r.benchmark == "mmlu"})
    per_group: list[dict[str, list[float]]] = []
    for g in range(groups):
        held = set(subjects[g::groups])
        train = [r for r in rows if r.subject not in held]
        test = [r for r in rows if r.subject in held]
        per_group.append(evaluate(train, test, resamples))
        print(f"subject group {g + 1}/{groups}: done", flush=True)
    return {
        name: [round(sum(g[name][k] for g in per_group) / groups, 4) for k in range(3)]
        for name in per_group[0]
    }


def in_domain(rows: Sequence[Row], folds: int = 3) -> dict[str, float]:
    """Mean APGR over random folds of everything: the optimistic number."""
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    totals: dict[str, float] = {}
    for fold in range(folds):
        test = [rows[i] for i in order[fold::folds]]
        train = [rows[i] for j, i in enumerate(order) if j % folds != fold]
        for name, run in scorers(train).items():
            totals[name] = totals.get(name, 0.0) + apgr(run(test), test) / folds
    return {name: round(value, 4) for name, value in totals.items()}


# -- live calibration and feedback --------------------------------------------------------


def live_shares(rows: Sequence[Row], window: int = 500) -> dict[str, Any]:
    """Per unseen benchmark: the shipped kind of scorer trained on the others, its trained
    thresholds, then live calibration over the benchmark's prompts in a shuffled order.
    Realised shares of the first `window` prompts and of the ones after."""
    out = {}
    for held in sorted({r.benchmark for r in rows}):
        train = [r for r in rows if r.benchmark != held]
        test = [r for r in rows if r.benchmark == held]
        random.Random(1).shuffle(test)
        scorer = LearnedScorer(train_encoded(encoded(train), TrainingOptions()))
        hand = FeatureScorer()
        live = LiveCalibration(scorer.calibration)
        upward: dict[str, list[bool]] = {p: [] for p in PROFILES}
        for r in test:
            learned = sigmoid(scorer.logit_of(r.buckets, r.values))
            feature = sigmoid(hand.logit(r.values))
            for profile in PROFILES:
                upward[profile].append(live.wants_strong(profile, learned, feature))
            live.observe(learned, feature)
        first = min(window, len(test) // 2)
        out[held] = {
            p: {
                "target": scorer.calibration.strong_shares[p],
                "first_window": round(sum(went[:first]) / first, 4),
                "after_window": round(sum(went[first:]) / len(went[first:]), 4),
            }
            for p, went in upward.items()
        }
    return out


def feedback_stream(rows: Sequence[Row], chunk: int = 250) -> dict[str, Any]:
    """Per unseen benchmark: a scorer trained on the others, then refitted (`gateway router
    train --from-ledger`, in effect) on feedback from half the benchmark's prompts arriving
    in chunks; APGR on the other half after each chunk."""
    out = {}
    for held in sorted({r.benchmark for r in rows}):
        train = [r for r in rows if r.benchmark != held]
        test = [r for r in rows if r.benchmark == held]
        random.Random(2).shuffle(test)
        stream, judged = test[: len(test) // 2], test[len(test) // 2 :]
        document = train_encoded(encoded(train), replace(TrainingOptions(), calibration_folds=1))
        curve = [[0, round(_apgr_of(document, judged), 4)]]
        seen = 0
        for start in range(0, min(len(stream), 8 * chunk), chunk):
            batch = stream[start : start + chunk]
            # Feedback says whether the cheaper model's answer was good enough.
            document = refit(
                document, [Example(r.outcome.prompt, 1 - r.outcome.weak) for r in batch]
            )
            seen += len(batch)
            curve.append([seen, round(_apgr_of(document, judged), 4)])
        out[held] = curve
        print(f"feedback stream {held}: done", flush=True)
    return out


def _apgr_of(document: dict[str, Any], test: Sequence[Row]) -> float:
    scorer = LearnedScorer(document)
    return apgr([scorer.logit_of(r.buckets, r.values) for r in test], test)


# -- report -------------------------------------------------------------------------------


def render(report: dict[str, Any], command: str) -> str:
    lines = [
        "# Routing: transfer to unseen traffic",
        "",
        "Regenerate with:",
        "",
        f"    {command}",
        "",
        "APGR (random 0.5) with bootstrap 95% intervals over the held-out prompts. Scorers:",
        "`ensemble` is the shipped kind (fitted n-grams and features plus the hand-set feature",
        "prior, summed in log-odds); `fitted` the fitted model alone; labels `strong-only` (the",
        "cheaper model fell short and the stronger did not) and `weak-fails` (the cheaper model",
        "fell short). Sources: " + report["sources"],
        "",
    ]
    names = list(next(iter(report["leave_one_benchmark_out"].values())))
    held = list(report["leave_one_benchmark_out"])
    lines += ["## Leave one benchmark out", ""]
    lines += ["| scorer | " + " | ".join(f"unseen {h}" for h in held) + " | in-domain CV |"]
    lines += ["|---" * (len(held) + 2) + "|"]
    for name in names:
        cells = [_ci(report["leave_one_benchmark_out"][h][name]) for h in held]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {report['in_domain'][name]:.3f} |")
    lines += ["", "## Leave MMLU subjects out (5 groups of subjects, means)", ""]
    lines += ["| scorer | APGR [95%] |", "|---|---|"]
    for name, value in report["leave_subjects_out"].items():
        lines.append(f"| {name} | {_ci(value)} |")
    lines += ["", "## Live calibration on unseen benchmarks", ""]
    lines += [
        "Shipped kind of scorer trained on the other benchmarks; share of calls sent past the",
        "cheapest model, at the trained thresholds (first prompts) and after a window of live",
        "traffic.",
        "",
        "| unseen | profile | target | first window | after the window |",
        "|---|---|---|---|---|",
    ]
    for bench, profiles in report["live_shares"].items():
        for profile, v in profiles.items():
            lines.append(
                f"| {bench} | {profile} | {v['target']:.0%} | {v['first_window']:.1%} "
                f"| {v['after_window']:.1%} |"
            )
    lines += ["", "## Feedback stream", ""]
    lines += [
        "Scorer trained on the other benchmarks, refitted on feedback (whether the cheaper",
        "model's answer was good enough) from half the unseen benchmark's prompts; APGR on the",
        "other half after N feedback rows.",
        "",
        "| unseen | N: APGR |",
        "|---|---|",
    ]
    for bench, curve in report["feedback_stream"].items():
        lines.append(f"| {bench} | " + ", ".join(f"{n}: {v:.3f}" for n, v in curve) + " |")
    lines += ["", f"Run took {report['seconds']:.0f} s on {report['cpus']} CPUs.", ""]
    return "\n".join(lines)


def _ci(value: Sequence[float]) -> str:
    return f"{value[0]:.3f} [{value[1]:.3f}, {value[2]:.3f}]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--alpaca-eval", type=Path, help="a checkout of tatsu-lab/alpaca_eval")
    parser.add_argument("--routerbench", type=Path, help="a checkout of shuhao02/RouterDC")
    parser.add_argument("--bootstrap", type=int, default=100)
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows = load(args.data, args.alpaca_eval, args.routerbench, TrainingOptions().hash_bits)
    sources = (
        "RouteLLM's MMLU and GSM8K outcomes (Mixtral-8x7B-Instruct-v0.1 vs gpt-4-1106-preview)"
    )
    if args.alpaca_eval:
        sources += (
            f"; AlpacaEval's 805 open-ended prompts ({ALPACA_MODEL} judged against "
            f"gpt-4-1106-preview by {ALPACA_ANNOTATOR}, tatsu-lab/alpaca_eval, Apache-2.0)"
        )
    if args.routerbench:
        sources += (
            "; RouterBench's ARC-Challenge, MBPP and Winogrande outcomes for the same pair "
            "(withmartian/routerbench, MIT, as shuhao02/RouterDC holds them)"
        )
    report: dict[str, Any] = {"sources": sources}
    report["leave_one_benchmark_out"] = leave_one_benchmark_out(rows, args.bootstrap)
    report["leave_subjects_out"] = leave_subjects_out(rows, args.bootstrap)
    report["in_domain"] = in_domain(rows)
    report["live_shares"] = live_shares(rows)
    report["feedback_stream"] = feedback_stream(rows)
    report["seconds"] = time.monotonic() - started
    report["cpus"] = os.cpu_count()
    command = "python -m bench.routing_transfer"
    command += " --alpaca-eval ../alpaca_eval" if args.alpaca_eval else ""
    command += " --routerbench ../RouterDC" if args.routerbench else ""
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "routing_transfer.json").write_text(
        json.dumps(report, indent=1) + "\n", encoding="utf-8"
    )
    (ROOT / "docs" / "routing-transfer.md").write_text(render(report, command), encoding="utf-8")
    print(render(report, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
