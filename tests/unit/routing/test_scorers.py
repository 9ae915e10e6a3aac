"""The prompt-difficulty scorers, their training and calibration, and live calibration."""

from __future__ import annotations

import csv
import json
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from server.routing import text, training
from server.routing.calibration import DEFAULT_STRONG_SHARES, Calibration
from server.routing.features import FeatureScorer, sigmoid
from server.routing.live import LiveCalibration
from server.routing.outcomes import (
    LABELS,
    STRONG_MODEL,
    WEAK_MODEL,
    Example,
    examples_from_feedback,
    examples_from_outcomes,
    read_outcomes,
)
from server.routing.scorer import DEFAULT_MODEL_PATH, MODEL_FORMAT, LearnedScorer
from server.routing.training import TrainingOptions, encode, main, train, train_encoded

EASY = [
    "What is the capital of France?",
    "Who wrote Romeo and Juliet?",
    "What colour is the sky on a clear day?",
]
HARD = [
    "A train leaves at 3:15 pm at 84 km/h and a second one 45 minutes later at 112 km/h. "
    "Step by step, how many minutes after 3:15 pm does the second catch up, and how far "
    "from the station? Then compute the fuel cost if each uses 3.2 litres per 10 km at "
    "$1.85 per litre.",
    "Prove that the sum of the first n odd numbers is n^2, then explain why the proof by "
    "induction fails if the base case is omitted.",
    "Write a Python function `def merge_intervals(xs):` that merges overlapping intervals; "
    "explain its complexity and why sorting first is required.\n```python\n"
    "def merge_intervals(xs):\n    xs.sort()\n    return xs\n```",
]


@pytest.fixture(scope="module")
def learned() -> LearnedScorer:
    return LearnedScorer.load()


def _scorers(learned: LearnedScorer) -> list:
    return [FeatureScorer(), learned]


def test_scores_are_deterministic_and_in_range(learned):
    for scorer in _scorers(learned):
        for prompt in EASY + HARD + ["", "x" * 50_000, "Привет, как дела? 你好"]:
            first = scorer.difficulty(prompt, None)
            assert 0.0 <= first <= 1.0
            assert scorer.difficulty(prompt, None) == first


def test_a_fresh_load_scores_the_same(learned):
    again = LearnedScorer.load(DEFAULT_MODEL_PATH)
    assert [again.difficulty(p) for p in HARD] == [learned.difficulty(p) for p in HARD]


@pytest.mark.parametrize("hard", HARD)
def test_hard_prompts_score_above_easy_ones(learned, hard):
    for scorer in _scorers(learned):
        easiest_above = max(scorer.difficulty(p) for p in EASY)
        assert scorer.difficulty(hard) > easiest_above, type(scorer).__name__


def test_requesting_long_output_raises_the_feature_difficulty():
    scorer = FeatureScorer()
    prompt = "Summarise the history of the Roman Empire."
    assert scorer.difficulty(prompt, 4000) > scorer.difficulty(prompt, 50)


def test_default_model_is_small_credited_and_calibrated(learned):
    assert DEFAULT_MODEL_PATH.stat().st_size < 300_000
    document = json.loads(DEFAULT_MODEL_PATH.read_text())
    assert "RouteLLM" in document["source"]
    assert document["command"].startswith("python -m server.routing.training")
    thresholds = learned.calibration.thresholds
    # A profile that wants more quality sends more prompts to the strong tier.
    assert thresholds["quality"] < thresholds["balanced"] < thresholds["economy"]


_STEPS = [
    "then buys {} more",
    "then gives away {} of them",
    "then doubles what is left and adds {}",
    "then splits them into {} equal boxes",
    "then sells each box for ${}",
    "then pays a {} percent tax",
]


def _write_outcomes(path: Path, rows: int, seed: int) -> None:
    """Word problems of 0 to 12 steps: the more steps, the likelier the weak model fails.

    Many levels of difficulty, so that a threshold can land between them.
    """
    rng = random.Random(seed)
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["prompt", "weak-model", "strong-model"])
        for _ in range(rows):
            steps = rng.randint(0, 12)
            chosen = rng.choices(_STEPS, k=steps)
            parts = [f"Sam has {rng.randint(2, 99)} pens"]
            parts += [step.format(rng.randint(2, 99)) for step in chosen]
            prompt = ", ".join(parts) + ". How many dollars does he end with?"
            weak = rng.random() > steps / 13
            strong = rng.random() > steps / 50
            writer.writerow([prompt, weak, strong])


def test_training_on_a_small_csv_hits_its_target_shares_on_like_data(tmp_path):
    data = tmp_path / "outcomes.csv"
    _write_outcomes(data, 600, seed=7)
    fresh = tmp_path / "fresh.csv"
    _write_outcomes(fresh, 600, seed=8)
    out = tmp_path / "model.json"
    argv = ["--csv", str(data), "--weak", "weak-model", "--strong", "strong-model"]
    argv += ["--share", "balanced=0.4", "--hash-bits", "10", "--out", str(out)]
    assert main(argv) == 0
    scorer = LearnedScorer.load(out)
    # Thresholds are meant for prompts the model has not seen: check on a fresh sample.
    with open(fresh, encoding="utf-8") as rows:
        prompts = [row["prompt"] for row in csv.DictReader(rows)]
    scores = [scorer.difficulty(p) for p in prompts]
    for profile, target in scorer.calibration.strong_shares.items():
        share = sum(scorer.calibration.wants_strong(profile, s) for s in scores) / len(scores)
        assert abs(share - target) <= 0.05, (profile, share, target)
    assert scorer.calibration.strong_shares["balanced"] == 0.4
    # The summed log-odds are rescaled by a Platt fit, kept to 6 decimals.
    ensemble = scorer.document["model"]["ensemble"]
    assert ensemble["scale"] == round(ensemble["scale"], 6) != 1.0
    assert ensemble["shift"] == round(ensemble["shift"], 6) != 0.0
    assert ensemble["shift"] != round(ensemble["shift"])
    long_problem = "Sam has 4 pens, " + ", ".join(s.format(7) for s in _STEPS) + ". How many?"
    assert scorer.difficulty(long_problem) > scorer.difficulty("Sam has 4 pens. How many?")


def test_the_command_line_reads_folders_exclusions_feedback_and_its_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, more = tmp_path / "eval" / "maths", tmp_path / "more"
    data.mkdir(parents=True)
    more.mkdir()
    _write_outcomes(data / "a.csv", 300, seed=1)
    _write_outcomes(more / "b.csv", 100, seed=2)
    prompts = {}
    for name, path in [("a", data / "a.csv"), ("b", more / "b.csv")]:
        with open(path, encoding="utf-8") as rows:
            prompts[name] = list(csv.DictReader(rows))
    (data / "contaminated_prompts.jsonl").write_text(
        json.dumps({"eval_prompt": prompts["a"][0]["prompt"]}) + "\n\n", encoding="utf-8"
    )
    excluded = tmp_path / "excluded.jsonl"
    excluded.write_text(json.dumps({"eval_prompt": prompts["b"][0]["prompt"]}) + "\n")
    feedback = tmp_path / "feedback.csv"
    feedback.write_text("prompt,score\nSay hi.,1\nIntegrate x^2 sin x.,0\n", encoding="utf-8")
    out = tmp_path / "model.json"
    argv = ["--data", str(tmp_path / "eval"), "--csv-dir", str(more), "--exclude", str(excluded)]
    argv += ["--feedback", str(feedback), "--weak", "weak-model", "--strong", "strong-model"]
    argv += ["--label", "weak-fails", "--feature-weight", "0", "--priors", "--epochs", "1"]
    argv += ["--hash-bits", "9", "--source", "credit", "--share", "economy=0.1"]
    argv += ["--out", str(out)]
    assert main(argv) == 0
    document = json.loads(out.read_text(encoding="utf-8"))
    dropped = {prompts["a"][0]["prompt"], prompts["b"][0]["prompt"]}
    kept = [row for row in prompts["a"] + prompts["b"] if row["prompt"] not in dropped]
    assert capsys.readouterr().out == f"trained on {len(kept) + 2} prompts; wrote {out}\n"
    # weak-fails: the share of kept prompts the weak model got wrong, and the feedback's one.
    fails = sum(row["weak-model"] == "False" for row in kept) + 1
    defaults = TrainingOptions()
    assert document["training"] == {
        "rows": len(kept) + 2,
        "positive_share": round(fails / (len(kept) + 2), 6),
        "epochs": 1,
        "learning_rate": defaults.learning_rate,
        "l2": defaults.l2,
        "seed": defaults.seed,
        "calibration_folds": defaults.calibration_folds,
        "label": "weak-fails",
    }
    assert document["format"] == MODEL_FORMAT and document["label"] == LABELS["weak-fails"]
    assert document["text"] == {"head_chars": text.HEAD_CHARS, "tail_chars": text.TAIL_CHARS}
    assert document["model"]["hash_bits"] == 9
    # Without the hand-set prior the fitted log-odds are served as they are.
    assert document["model"]["ensemble"] == {
        "learned_weight": 1.0, "feature_weight": 0.0, "scale": 1.0, "shift": 0.0,
    }  # fmt: skip
    hand = FeatureScorer()
    trained = [row["prompt"] for row in kept] + ["Say hi.", "Integrate x^2 sin x."]
    shares = LearnedScorer(document).calibration.strong_shares
    expected = Calibration.fit([hand.difficulty(p) for p in trained], shares)
    assert document["feature_calibration"] == expected.to_json()
    assert document["source"] == "credit"
    assert document["command"] == "python -m server.routing.training " + " ".join(argv)
    assert LearnedScorer(document).calibration.strong_shares["economy"] == 0.1
    assert document["models"] == {
        column: round(sum(row[column] == "True" for row in kept) / len(kept), 4)
        for column in ("weak-model", "strong-model")
    }


# What `--help` says, word for word.
HELP = """usage: python -m server.routing.training [-h] [--data DATA] [--csv CSV]
        [--csv-dir CSV_DIR] [--exclude EXCLUDE] [--feedback FEEDBACK] [--weak WEAK]
        [--strong STRONG] [--share PROFILE=SHARE] [--label {strong-only,weak-fails}]
        [--feature-weight FEATURE_WEIGHT] [--priors] [--hash-bits HASH_BITS]
        [--epochs EPOCHS] [--source SOURCE] --out OUT
        Trains a `LearnedScorer` from labelled outcomes and writes its JSON model file.
        options: -h, --help show this help message and exit
        --data DATA a folder laid out like routing-eval: every *.csv in it is outcomes,
        every contaminated_prompts.jsonl lists prompts to drop
        --csv CSV outcomes CSV
        --csv-dir CSV_DIR a folder whose *.csv files (recursively) are outcomes
        --exclude EXCLUDE JSONL of contaminated prompts (field eval_prompt) to drop
        --feedback FEEDBACK CSV of prompt,score feedback on the cheaper model's answers
        --weak WEAK column of the cheaper model
        --strong STRONG column of the stronger model
        --share PROFILE=SHARE target strong share of a profile, e.g. balanced=0.45
        --label {strong-only,weak-fails} strong-only: the cheaper model fell short and the
        stronger did not (default); weak-fails: the cheaper model fell short
        --feature-weight FEATURE_WEIGHT weight of the hand-set feature prior in the served
        log-odds (0: fitted only)
        --priors store every model column's success rate as that model's quality prior
        --hash-bits HASH_BITS --epochs EPOCHS --source SOURCE credit for the training data
        --out OUT"""


def test_the_command_line_explains_its_options(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.split() == HELP.split()


def test_thresholds_are_set_on_scores_of_prompts_each_fold_never_saw(tmp_path: Path) -> None:
    data = tmp_path / "outcomes.csv"
    _write_outcomes(data, 90, seed=3)
    outcomes = read_outcomes([data], weak="weak-model", strong="strong-model")
    options = TrainingOptions(hash_bits=8, feature_weight=0.0, calibration_folds=3)
    rows = encode(examples_from_outcomes(outcomes), options.hash_bits)
    document = train_encoded(rows, options)
    scores = []
    for fold in range(3):
        kept = [r for i, r in enumerate(rows) if i % 3 != fold]
        alone = LearnedScorer(train_encoded(kept, replace(options, calibration_folds=1)))
        scores += [sigmoid(alone.logit_of(r.buckets, r.values)) for r in rows[fold::3]]
    expected = Calibration.fit(scores, options.strong_shares).to_json()
    assert document["calibration"] == expected
    in_sample = LearnedScorer(document)
    assert (
        expected
        != Calibration.fit(
            [sigmoid(in_sample.logit_of(r.buckets, r.values)) for r in rows], options.strong_shares
        ).to_json()
    )


def test_without_folds_the_ensemble_is_rescaled_on_its_own_scores(tmp_path: Path) -> None:
    data = tmp_path / "outcomes.csv"
    _write_outcomes(data, 60, seed=5)
    outcomes = read_outcomes([data], weak="weak-model", strong="strong-model")
    rows = encode(examples_from_outcomes(outcomes), 8)
    document = train_encoded(rows, TrainingOptions(hash_bits=8, calibration_folds=1))
    ensemble = document["model"]["ensemble"]
    unscaled = dict(document["model"], ensemble=dict(ensemble, scale=1.0, shift=0.0))
    bare = LearnedScorer(dict(document, model=unscaled))
    pairs = [(bare.logit_of(r.buckets, r.values), r.target) for r in rows]
    scale, shift = training._platt(pairs)
    assert (ensemble["scale"], ensemble["shift"]) == (round(scale, 6), round(shift, 6))


def test_training_needs_rows() -> None:
    with pytest.raises(ValueError, match="^no training examples$"):
        train_encoded([])


def test_the_command_line_needs_training_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--out", str(tmp_path / "model.json")])
    assert refused.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: no training rows: give --data, --csv, --csv-dir or --feedback\n"
    )
    assert not (tmp_path / "model.json").exists()


def test_the_command_line_defaults_to_routellms_columns_and_its_own_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, out = tmp_path / "outcomes.csv", tmp_path / "model.json"
    with open(data, "w", newline="", encoding="utf-8") as rows:
        writer = csv.writer(rows)
        writer.writerow(["prompt", WEAK_MODEL, STRONG_MODEL])
        writer.writerows([[p, True, True] for p in EASY] + [[p, False, True] for p in HARD])
    monkeypatch.setattr(sys, "argv", ["training", "--csv", str(data), "--out", str(out)])
    assert main() == 0
    written = out.read_text(encoding="utf-8")
    assert written.startswith('{\n "format": ') and written.endswith("}\n")
    document = json.loads(written)
    assert document["command"] == f"python -m server.routing.training --csv {data} --out {out}"
    assert document["source"] == "" and document["training"]["rows"] == 6
    assert document["model"]["hash_bits"] == TrainingOptions.hash_bits
    assert LearnedScorer(document).calibration.strong_shares == DEFAULT_STRONG_SHARES


def test_feedback_rows_train_a_model():
    rows = [("Say hi.", 1.0), ("Integrate x^2 sin x step by step.", 0.0)] * 20
    examples = list(examples_from_feedback(rows))
    assert examples[1] == Example("Integrate x^2 sin x step by step.", 1.0)
    document = train(examples, TrainingOptions(hash_bits=8, calibration_folds=1))
    scorer = LearnedScorer(document)
    assert scorer.difficulty("Integrate x^2 sin x step by step.") > scorer.difficulty("Say hi.")
    assert document["source"] == document["command"] == ""


def _calibration() -> Calibration:
    return Calibration.fit([i / 1000 for i in range(1000)])


def test_familiar_traffic_keeps_the_trained_thresholds_and_no_blend():
    live = LiveCalibration(_calibration())
    rng = random.Random(3)
    for _ in range(1000):
        live.observe(rng.random(), rng.random())
    assert not live.drifting and not live.blending
    for profile, trained in _calibration().thresholds.items():
        assert live.threshold(profile) == pytest.approx(trained, abs=0.04)
    assert live.difficulty(0.3, 0.9) == 0.3


def _replay(live: LiveCalibration, history: list[tuple[float, float]]) -> list[bool]:
    decisions = []
    for learned, feature in history:
        upward = live.wants_strong("balanced", learned, feature)
        decisions.append(upward)
        live.decided("balanced", upward)
        live.observe(learned, feature)
    return decisions


def test_shifted_traffic_is_recentred_deterministically():
    rng = random.Random(5)
    # Every learned score sits below the balanced threshold (0.55): at the trained
    # thresholds, nothing would go up the ladder.
    history = [(0.1 + 0.3 * rng.random(), rng.random()) for _ in range(1200)]
    live = LiveCalibration(_calibration(), window=400)
    decisions = _replay(live, history)
    assert live.drifting and live.blending and live.blend_reason == "drift"
    assert live.difficulty(0.2, 0.8) == pytest.approx(0.5)
    late = decisions[400:]
    assert abs(sum(late) / len(late) - 0.45) < 0.05
    assert live.shares()["balanced"][0] == 0.45
    assert abs(live.shares()["balanced"][1] - 0.45) < 0.05
    assert _replay(LiveCalibration(_calibration(), window=400), history) == decisions


def test_every_profile_meets_its_target_after_a_window_of_a_new_mix():
    rng = random.Random(11)
    live = LiveCalibration(_calibration(), window=500)
    mixes = [
        lambda: rng.betavariate(2, 8),  # mostly easy
        lambda: rng.betavariate(8, 2),  # mostly hard
        lambda: rng.random() ** 3,  # skewed, long tail
    ]
    for mix in mixes:
        for phase in ("settle", "measure"):
            upward: dict[str, list[bool]] = {p: [] for p in _calibration().thresholds}
            for _ in range(500):
                score = mix()
                for profile in upward:
                    went = live.wants_strong(profile, score, score)
                    upward[profile].append(went)
                live.observe(score, score)
            if phase == "measure":
                for profile, went in upward.items():
                    target = _calibration().strong_shares[profile]
                    assert abs(sum(went) / len(went) - target) <= 0.05, profile


def test_traffic_returning_to_the_training_distribution_ends_the_drift():
    rng = random.Random(9)
    live = LiveCalibration(_calibration(), window=300)
    for _ in range(400):
        live.observe(0.05 * rng.random(), rng.random())
    assert live.drifting
    # Evenly spread scores, as the calibration data was.
    for i in range(600):
        live.observe((i * 0.6180339887) % 1.0, rng.random())
    assert not live.drifting and not live.blending
    assert live.threshold("economy") == pytest.approx(
        _calibration().thresholds["economy"], abs=0.03
    )


def test_feedback_keeps_the_blend_only_where_it_ranks_better():
    rng = random.Random(4)
    informative_features = LiveCalibration(_calibration(), min_labelled=50)
    informative_learned = LiveCalibration(_calibration(), min_labelled=50)
    for _ in range(200):
        hard = rng.random() < 0.4
        signal = 0.5 + (0.3 if hard else -0.3) + rng.uniform(-0.2, 0.2)
        noise = rng.random()
        informative_features.observe(noise, signal)
        informative_features.label(noise, signal, 1.0 if hard else 0.0)
        informative_learned.observe(signal, noise)
        informative_learned.label(signal, noise, 1.0 if hard else 0.0)
    assert informative_features.blending and informative_features.blend_reason == "feedback"
    assert not informative_learned.blending
    assert informative_learned.blend_reason == "feedback"
