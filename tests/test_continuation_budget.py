"""Continuing a study compares trials only at equal budget: epochs, image size, dataset, workers.

Issue 51, case 3: an earlier study's 6-epoch trials were ranked beside today's 3-epoch ones,
and a 6-epoch score (0.9499) was retrained for 3 epochs (test 0.8278), with no word.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.settings import Settings
from pipelines.study import continuation, selection
from pipelines.study import trials as tl
from pipelines.study.continuation import ContinuationError, Earlier
from pipelines.targets import earlier_runs
from tests.test_continuation import DEFAULTS, SPACE, TODAY
from tests.test_continuation_sources import cli

# The earlier run's star: 0.95 after 6 epochs, but only 0.70 at epoch 3.
SLOW_STARTER = tl.make_trial(
    "1",
    {"learning_rate": 0.01, "num_units": 64},
    state=tl.TrialState.SUCCEEDED,
    final_measurement=tl.measurement(6, {"val_accuracy": 0.95}),
    measurements=[
        *(tl.measurement(e, {"val_accuracy": v}) for e, v in enumerate((0.3, 0.5, 0.7), 1)),
        *(tl.measurement(e, {"val_accuracy": v}) for e, v in enumerate((0.8, 0.9, 0.95), 4)),
        tl.measurement(6, {"model_size_mb": 1.5}),  # its cost, measured once after training
    ],
)
# Today's best 3-epoch trial.
TODAYS = tl.make_trial(
    "1",
    {"learning_rate": 0.02, "num_units": 128},
    state=tl.TrialState.SUCCEEDED,
    final_measurement=tl.measurement(3, {"val_accuracy": 0.85}),
    measurements=[
        tl.measurement(e, {"val_accuracy": v}) for e, v in enumerate((0.6, 0.8, 0.85), 1)
    ],
)
SAMPLE = {"dataset": "sample", "image_size": 28, "epochs": 6, "trial_workers": 0}


def reconciled(recorded, today, trials=(SLOW_STARTER,)):
    earlier = Earlier("runs/first", "first", list(trials), TODAY, recorded)
    return continuation.reconcile(earlier, SPACE, TODAY, DEFAULTS, budget=today)


def test_a_six_epoch_trial_is_scored_at_todays_three_epochs_and_not_picked_for_its_six():
    got = reconciled(SAMPLE, {**SAMPLE, "epochs": 3})
    assert (
        "rule budget: its trials ran epochs=6, today's is 3; each is scored by its measurements "
        "up to epoch 3, as the final job retrains for 3"
    ) in got.notes
    [rescored] = got.trials
    assert tl.final_metric(rescored, "val_accuracy") == 0.7
    assert rescored["finalMeasurement"]["stepCount"] == "3"
    assert tl.final_metric(rescored, "model_size_mb") == 1.5  # its cost kept
    assert [m["stepCount"] for m in rescored["measurements"]] == ["1", "2", "3"]
    tl.validate_trial(rescored)
    best = selection.select_best_trial(
        continuation.combine(got.trials, [TODAYS]), metric_id="val_accuracy"
    )
    assert best.trial_id == "1" and best.metric == 0.85  # today's, not first:1's 0.95


def test_equal_budgets_leave_the_earlier_trials_as_they_were():
    got = reconciled(SAMPLE, dict(SAMPLE))
    assert tl.final_metric(got.trials[0], "val_accuracy") == 0.95
    assert not any(n.startswith(("rule budget", "budget")) for n in got.notes)


@pytest.mark.parametrize(
    ("today", "refusal"),
    [
        (
            {"epochs": 12},
            "continue_from=runs/first: its trials ran epochs=6, today's is 12; a trial is "
            "compared only at equal budget and its scores stop at epoch 6: pass --epochs 6, "
            "or start a new study",
        ),
        (
            {"image_size": 32},
            "continue_from=runs/first: its trials ran at image_size=28, today's is 32; a study "
            "continues only at the same image size: pass --image-size 28, or start a new study",
        ),
        (
            {"trial_workers": 2},
            "continue_from=runs/first: its trials ran with trial_workers=0, today's is 2; a "
            "trial's global batch (and the learning rate that suits it) grows with its replicas: "
            "pass --trial-workers 0, or start a new study",
        ),
        (
            {"dataset": "40 files, sha256 0123456789ab"},
            "continue_from=runs/first: its trials were measured on other data (dataset 'sample', "
            "today's '40 files, sha256 0123456789ab'); a study continues only on the same data: "
            "start a new study (without --continue-from)",
        ),
    ],
)
def test_another_budget_is_refused_in_one_line(today, refusal):
    with pytest.raises(ContinuationError) as err:
        reconciled(SAMPLE, {**SAMPLE, **today})
    assert str(err.value) == refusal


def test_a_source_that_records_no_budget_is_said_in_one_line():
    got = reconciled(None, {**SAMPLE, "dataset": None, "epochs": 3})
    assert (
        "budget: runs/first records no epochs, image size or dataset (a trials file or a cloud "
        "run); its trials are compared as if they ran with today's image_size=28, epochs=3, "
        "trial_workers=0"
    ) in got.notes


# --------------------------------------------------------------------------- through the CLI


def earlier_run(tmp_path: Path, **recorded) -> Path:
    """A local run's output whose study recorded `recorded` in its identity.json."""
    output = tmp_path / "first"
    study = output / "study"
    study.mkdir(parents=True)
    tl.write_trials(str(study / "trials.json"), [SLOW_STARTER])
    (study / "study.json").write_text(
        json.dumps({"studySpec": {"metrics": [{"metric_id": "val_accuracy", "goal": 1}]}})
    )
    identity = {"dataset": "sample", "source": "sample", "image_size": 28, "epochs": 6}
    (study / "identity.json").write_text(json.dumps({**identity, **recorded}))
    return output


@pytest.fixture
def tiny_space(tmp_path: Path) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(
        "parameters:\n"
        "  - {id: learning_rate, type: double, min: 0.001, max: 0.1, scale: log}\n"
        "  - {id: num_units, type: discrete, values: [64, 128, 256]}\n"
    )
    return path


def compile_env(monkeypatch, tiny_space: Path, epochs: int) -> None:
    """What `compile --target vertex` needs, at image size 28 (the earlier run's)."""
    monkeypatch.setenv("HPT_TRAINER_IMAGE", "registry.example/hpt/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "registry.example/hpt/components:v1")
    monkeypatch.setenv("HPT_EPOCHS", str(epochs))
    monkeypatch.setenv("HPT_IMAGE_SIZE", "28")
    monkeypatch.setenv("HPT_SEARCH_SPACE", str(tiny_space))


def test_compile_says_the_earlier_trials_are_scored_at_todays_epochs(
    tmp_path, monkeypatch, tiny_space
):
    import yaml

    compile_env(monkeypatch, tiny_space, epochs=3)
    out = tmp_path / "p.yaml"
    source = earlier_run(tmp_path)
    got = cli("compile", "--target", "vertex", "--output", str(out), "--continue-from", str(source))
    assert got.exit_code == 0, got.output
    assert "note: rule budget: its trials ran epochs=6, today's is 3; each is scored" in got.output
    spec = yaml.safe_load(out.read_text())
    [carried] = spec["root"]["inputDefinitions"]["parameters"]["continued_trials"]["defaultValue"]
    assert tl.final_metric(carried, "val_accuracy") == 0.7  # epoch 3's, not epoch 6's 0.95


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (
            ["--epochs", "12", "--image-size", "28"],
            "its trials ran epochs=6, today's is 12; a trial is compared only at equal budget",
        ),
        (["--epochs", "6", "--image-size", "32"], "its trials ran at image_size=28, today's is 32"),
        (  # a study recorded before trial_workers existed ran one-machine trials
            ["--epochs", "6", "--image-size", "28", "--trial-workers", "1"],
            "its trials ran with trial_workers=0, today's is 1; a trial's global batch",
        ),
    ],
)
def test_run_refuses_another_budget_in_one_line_before_anything(
    tmp_path, tiny_space, flags, expected
):
    source = earlier_run(tmp_path)
    output = tmp_path / "out"
    got = cli(
        "run",
        "--continue-from",
        str(source),
        "--search-space",
        str(tiny_space),
        "--output",
        str(output),
        *flags,
    )
    assert got.exit_code == 2, got.output
    lines = got.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"hpt-pipeline: error: continue_from={source.resolve()}: {expected}")
    assert not output.exists()


def test_run_refuses_an_earlier_study_of_other_data(tmp_path, tiny_space):
    source = earlier_run(tmp_path, dataset="1797 files, sha256 0123456789ab")
    got = cli(
        "run",
        "--continue-from",
        str(source),
        "--search-space",
        str(tiny_space),
        "--epochs",
        "6",
        "--image-size",
        "28",
        "--output",
        str(tmp_path / "out"),
    )
    assert got.exit_code == 2, got.output
    assert "its trials were measured on other data (dataset '1797 files, sha256" in got.output
    assert "today's 'sample'" in got.output


def test_defaults_budget_leaves_epochs_out_when_the_space_tunes_them(tmp_path):
    space = tmp_path / "epochs.yaml"
    space.write_text(
        "parameters:\n  - {id: epochs, type: discrete, values: [2, 4]}\n"
        "  - {id: learning_rate, type: double, min: 0.001, max: 0.1, scale: log}\n"
    )
    settings = Settings(search_space=str(space), epochs=3, image_size=28)
    assert earlier_runs.budget(settings, "sample") == {
        "dataset": "sample",
        "image_size": 28,
        "epochs": None,
        "trial_workers": 0,
    }


def test_a_study_of_multi_worker_trials_continues_at_the_same_workers_and_not_at_others(
    tmp_path, monkeypatch, tiny_space
):
    compile_env(monkeypatch, tiny_space, epochs=6)
    source = earlier_run(tmp_path, trial_workers=1)

    def compile_with(*flags: str, name: str):
        out = tmp_path / name
        got = cli(
            "compile",
            "--target",
            "vertex",
            "--output",
            str(out),
            "--continue-from",
            str(source),
            *flags,
        )
        return got, out

    same, compiled = compile_with("--trial-workers", "1", name="p.yaml")
    assert same.exit_code == 0, same.output
    assert compiled.exists()
    other, refused = compile_with(name="q.yaml")
    assert other.exit_code == 2, other.output
    assert "its trials ran with trial_workers=1, today's is 0" in other.output
    assert not refused.exists()
