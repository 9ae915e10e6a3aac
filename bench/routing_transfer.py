"""How the difficulty scorers transfer to traffic they never saw: leave-one-benchmark-out and
leave-subject-out APGR with bootstrap 95% intervals, next to in-domain cross-validation; live
calibration's realised shares on each unseen benchmark; and learning from served traffic.

Data: RouteLLM's MMLU and GSM8K outcomes (`--data`, ../shared/routing-eval); when
`--alpaca-eval` names a checkout of tatsu-lab/alpaca_eval, its open-ended chat prompts judged
against gpt-4-1106-preview for Mixtral-8x7B-Instruct-v0.1 (the same pair as RouteLLM's data);
when `--routerbench` names a checkout of shuhao02/RouterDC, RouterBench's outcomes of the same
pair on ARC-Challenge, MBPP and Winogrande. Nothing is copied into the project.
Learning from traffic: the scorer refitted on ratings of the rung that served each prompt,
with exploration, on each unseen benchmark and on traffic mixing MMLU's subjects. Writes docs/routing-transfer.md and
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
from server.routing.tags import Rated, offset, offsets
from server.routing.training import Encoded, TrainingOptions, encode, refit, train_encoded

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


# Learning from traffic: the share of routed calls explored, the share the router sends
# past the cheapest model (balanced's target), and how often the scorer is refitted.
EXPLORE_SHARE = 0.2
UPWARD_SHARE = 0.45
REFIT_EVERY = 100


def served_stream(
    base: dict[str, Any], stream: Sequence[Row], tagged: Callable[[Row], tuple[str, ...]], n: int
) -> list[tuple[int, dict[str, Any], list[Rated]]]:
    """The first `n` prompts of `stream` served as the gateway serves them: each chunk
    of `REFIT_EVERY` routed by the scorer refitted on the ratings so far (the top
    `UPWARD_SHARE` of its scores past the cheapest model, `EXPLORE_SHARE` of the calls
    to the other rung at random), rated on the rung that served it. Returns (rated so
    far, scorer, the ratings) after every chunk."""
    rng = random.Random(3)
    document, rated = base, []
    out = [(0, base, [])]
    for start in range(0, min(n, len(stream)), REFIT_EVERY):
        chunk = stream[start : min(n, start + REFIT_EVERY)]
        scorer = LearnedScorer(document)
        scores = [scorer.logit_of(r.buckets, r.values, tagged(r)) for r in chunk]
        cut = sorted(scores, reverse=True)[int(UPWARD_SHARE * len(chunk))]
        for row, score in zip(chunk, scores, strict=True):
            upward = score > cut
            if rng.random() < EXPLORE_SHARE:
                upward = not upward
            served = row.outcome.strong if upward else row.outcome.weak
            rated.append(Rated(row.outcome.prompt, tagged(row), not upward, served))
        document = refit(base, rated)
        out.append((len(rated), document, list(rated)))
    return out


def learning_figures(
    base: dict[str, Any],
    stream: Sequence[Row],
    judged: Sequence[Row],
    tagged: Callable[[Row], tuple[str, ...]],
    n: int,
) -> dict[str, Any]:
    """APGR on `judged` of the scorer refitted on served ratings after each chunk; and,
    on the ratings of `n` prompts, of the parts alone and of a model fitted from scratch
    on the cheapest rung's rated answers of the same prompts."""
    served = served_stream(base, stream, tagged, n)
    curve = [[count, round(_apgr_of(doc, judged, tagged), 4)] for count, doc, _ in served]
    rated = served[-1][2]
    untagged = [Rated(r.prompt, (), r.cheapest, r.score) for r in rated]
    known = offsets(rated)
    weak_rows = [r for r in rated if r.cheapest]
    scratch = train_encoded(
        encode([Example(r.prompt, 1.0 - r.score) for r in weak_rows], TrainingOptions().hash_bits),
        replace(TrainingOptions(), label="weak-fails", calibration_folds=1),
    )
    return {
        "curve": curve,
        "rated": len(rated),
        "cheapest_rated": len(weak_rows),
        "refit": curve[-1][1],
        "prompt_weight": served[-1][1].get("weights", {}).get("prompt", 1.0),
        "scratch": round(_apgr_of(scratch, judged, tagged), 4),
        "prompt_scorer_alone": round(_apgr_of(refit(base, untagged), judged, tagged), 4),
        "tags_alone": round(apgr([offset(known, tagged(r)) for r in judged], judged), 4),
        "both_rungs": round(apgr(_kind_gains(stream[:n], judged, tagged), judged), 4),
        "kinds_ceiling": round(apgr(_kind_gains(judged, judged, tagged), judged), 4),
        "before": curve[0][1],
    }


def _kind_gains(
    seen: Sequence[Row], judged: Sequence[Row], tagged: Callable[[Row], tuple[str, ...]]
) -> list[float]:
    """Each judged prompt's score: its kind's mean gain (the stronger answer's score
    less the cheaper one's) over `seen`, as if every seen prompt were rated on both rungs;
    0 for a kind not seen."""
    gains: dict[tuple[str, ...], list[float]] = {}
    for r in seen:
        gains.setdefault(tagged(r), []).append(r.outcome.strong - r.outcome.weak)
    return [sum(gains.get(tagged(r), [0.0])) / len(gains.get(tagged(r), [0.0])) for r in judged]


def learn_unseen(rows: Sequence[Row], n: int = 500) -> dict[str, Any]:
    """Per unseen benchmark, its name as every prompt's tag: the shipped kind of scorer
    trained on the others, then `n` prompts served and rated; APGR on the rest."""
    out = {}
    for held in sorted({r.benchmark for r in rows}):
        train = [r for r in rows if r.benchmark != held]
        test = [r for r in rows if r.benchmark == held]
        random.Random(2).shuffle(test)
        base = train_encoded(encoded(train), replace(TrainingOptions(), calibration_folds=1))
        out[held] = learning_figures(base, test[:n], test[n:], lambda r: (r.benchmark,), n)
        print(f"learn unseen {held}: {out[held]}", flush=True)
    return out


def learn_mixed(rows: Sequence[Row], n: int = 400, groups: int = 5) -> dict[str, Any]:
    """Traffic mixing many kinds: each of `groups` groups of MMLU subjects held out in
    turn, each prompt tagged with its subject, the shipped kind of scorer trained on the
    rest; `n` prompts served and rated, APGR on the rest."""
    subjects = sorted({r.subject for r in rows if r.benchmark == "mmlu"})
    out = {}
    for g in range(groups):
        held = set(subjects[g::groups])
        train = [r for r in rows if r.subject not in held]
        test = [r for r in rows if r.subject in held]
        random.Random(2).shuffle(test)
        base = train_encoded(encoded(train), replace(TrainingOptions(), calibration_folds=1))
        out[f"group {g + 1}"] = learning_figures(
            base, test[:n], test[n:], lambda r: (r.subject,), n
        )
        print(f"learn mixed group {g + 1}: {out[f'group {g + 1}']}", flush=True)
    return out


def _apgr_of(
    document: dict[str, Any],
    test: Sequence[Row],
    tagged: Callable[[Row], tuple[str, ...]] = lambda r: (),
) -> float:
    scorer = LearnedScorer(document)
    return apgr([scorer.logit_of(r.buckets, r.values, tagged(r)) for r in test], test)


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
    lines += ["", "## Learning from traffic", ""]
    lines += [
        "Scorer of the shipped kind trained on the rest; then prompts served by it, refitted",
        f"every {REFIT_EVERY} ratings (`training.refit`: a fresh fit on every rating, the",
        "scorer it started from as a weighted prior, per-tag estimates): the top",
        f"{UPWARD_SHARE:.0%} of each chunk's scores past the cheapest model, "
        f"{EXPLORE_SHARE:.0%} of the calls explored",
        "(the other rung, at random), each rated on the rung that served it. APGR on the",
        "prompts not served. `scratch`: the shipped kind fitted from nothing on the cheapest",
        "rung's rated answers of the same prompts; `prompt scorer alone`: the refit without",
        "tags; `tags alone`: the tag estimates alone; the prompt weight is the one the refit",
        "chose beside the tags (`training.prompt_weight`). Two bounds on what ranking by kind",
        "can reach: `both rungs` ranks by each kind's mean gain over the same prompts as if",
        "each were rated on both rungs (twice the ratings the stream gives), `kinds' true",
        "gain` by each kind's mean gain over the judged prompts themselves.",
        "",
    ]
    sections = [
        ("Each unseen benchmark, its name as the tag", report["learn_unseen"]),
        ("Traffic mixing many kinds: a held-out group of MMLU subjects, each its subject as "
         "the tag", report["learn_mixed"]),
    ]  # fmt: skip
    for title, runs in sections:
        lines += [f"{title}:", ""]
        lines += [
            "| traffic | rated (cheapest rung) | before | refit (prompt weight) | scratch "
            "| prompt scorer alone | tags alone | both rungs | kinds' true gain | after N rated |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name, v in runs.items():
            lines.append(
                f"| {name} | {v['rated']} ({v['cheapest_rated']}) | {v['before']:.3f} "
                f"| {v['refit']:.3f} ({v['prompt_weight']:g}) | {v['scratch']:.3f} | {v['prompt_scorer_alone']:.3f} "
                f"| {v['tags_alone']:.3f} | {v['both_rungs']:.3f} | {v['kinds_ceiling']:.3f} | "
                + ", ".join(f"{n}: {a:.3f}" for n, a in v["curve"])
                + " |"
            )
        mean = {k: sum(v[k] for v in runs.values()) / len(runs) for k in _MEANS}
        lines.append("| mean | | " + " | ".join(f"{mean[k]:.3f}" for k in _MEANS) + " | |")
        lines.append("")
    lines += [
        f"Run took {report['seconds']:.0f} s on {report['cpus']} CPUs; learning from traffic "
        f"{report['learning_seconds']:.0f} s.",
        "",
    ]
    return "\n".join(lines)


_MEANS = (
    "before", "refit", "scratch", "prompt_scorer_alone", "tags_alone", "both_rungs",
    "kinds_ceiling",
)  # fmt: skip


def _ci(value: Sequence[float]) -> str:
    return f"{value[0]:.3f} [{value[1]:.3f}, {value[2]:.3f}]"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--alpaca-eval", type=Path, help="a checkout of tatsu-lab/alpaca_eval")
    parser.add_argument("--routerbench", type=Path, help="a checkout of shuhao02/RouterDC")
    parser.add_argument("--bootstrap", type=int, default=100)
    parser.add_argument(
        "--learning-only",
        action="store_true",
        help="run only learning from traffic (on --data's benchmarks); the other "
        "sections are read from the stored results",
    )
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
    command = "python -m bench.routing_transfer"
    command += " --alpaca-eval ../alpaca_eval" if args.alpaca_eval else ""
    command += " --routerbench ../RouterDC" if args.routerbench else ""
    stored = ROOT / "bench" / "results" / "routing_transfer.json"
    if args.learning_only:
        report = json.loads(stored.read_text(encoding="utf-8"))
        report.pop("feedback_stream", None)  # the section learning from traffic replaced
    else:
        report = {"sources": sources, "command": command}
        report["leave_one_benchmark_out"] = leave_one_benchmark_out(rows, args.bootstrap)
        report["leave_subjects_out"] = leave_subjects_out(rows, args.bootstrap)
        report["in_domain"] = in_domain(rows)
        report["live_shares"] = live_shares(rows)
        report["seconds"] = time.monotonic() - started
        report["cpus"] = os.cpu_count()
    learning = time.monotonic()
    report["learn_unseen"] = learn_unseen(rows)
    report["learn_mixed"] = learn_mixed(rows)
    report["learning_seconds"] = time.monotonic() - learning
    # Runs before the command was stored had these sources.
    command = report.setdefault(
        "command", "python -m bench.routing_transfer --alpaca-eval ../alpaca_eval "
        "--routerbench ../RouterDC"
    )  # fmt: skip
    stored.parent.mkdir(exist_ok=True)
    stored.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (ROOT / "docs" / "routing-transfer.md").write_text(render(report, command), encoding="utf-8")
    print(render(report, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
