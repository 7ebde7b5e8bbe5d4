"""Successive halving (`scheduler` asha, hyperband): the rung rule, and the local study."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import optuna
import pytest

from pipelines.compiler import compile_pipeline
from pipelines.reports import trial_report
from pipelines.settings import Settings, SettingsError
from pipelines.study import halving, progress_lines, selection
from pipelines.study import trials as tl
from pipelines.study.halving import Halving, Rungs
from pipelines.study.search_space import Metric, SearchSpace
from pipelines.study.trials import TrialState
from pipelines.targets.local.local_study import StudyError
from tests.test_local_study import SPACE, study
from tests.test_pipeline_spec import compiled, for_target

optuna.logging.set_verbosity(optuna.logging.WARNING)

ASHA = Halving("asha", 1, 3, 9, "val_accuracy")


def test_rungs_are_min_epochs_times_eta_powers_below_the_top():
    assert ASHA.rungs(0) == [1, 3]
    assert Halving("asha", 2, 2, 16, "m").rungs(0) == [2, 4, 8]
    hyperband = Halving("hyperband", 1, 3, 9, "m")
    assert hyperband.brackets() == 3
    assert [hyperband.rungs(b) for b in range(3)] == [[1, 3], [3], []]
    assert [hyperband.bracket_of(str(i)) for i in range(1, 7)] == [0, 1, 2, 0, 1, 2]


def test_a_trial_goes_on_only_in_the_top_third_of_its_rung_so_far():
    rungs = Rungs(ASHA)
    # the first to reach a rung is the best there so far; then one in three goes on
    assert rungs.judge("1", {1: 0.5}) is None
    assert rungs.judge("2", {1: 0.4}) == 1  # 2 recorded: keep max(1, 0) = 1 → only 0.5
    assert rungs.judge("3", {1: 0.6}) is None  # best of three
    assert rungs.judge("4", {1: 0.55}) == 1  # 4 recorded, keep 1: 0.6
    assert rungs.judge("5", {1: 0.1}) == 1
    assert rungs.judge("6", {1: 0.58}) is None  # 6 recorded, keep 2: 0.6, 0.58


def test_a_decision_stands_whatever_the_rung_records_later():
    rungs = Rungs(ASHA)
    assert rungs.judge("1", {1: 0.5}) is None
    for i, value in enumerate((0.9, 0.8, 0.7, 0.95), start=2):
        rungs.judge(str(i), {1: value})
    assert rungs.judge("1", {1: 0.5, 2: 0.6}) is None  # still promoted from rung 1


def test_minimizing_keeps_the_lowest():
    rungs = Rungs(Halving("asha", 1, 2, 4, "val_loss", "minimize"))
    assert rungs.judge("1", {1: 0.5}) is None
    assert rungs.judge("2", {1: 0.7}) == 1
    assert rungs.judge("3", {1: 0.2}) is None


def test_rung_values_are_read_back_from_the_recorded_trials():
    done = tl.make_trial(
        "1",
        {},
        state=TrialState.SUCCEEDED,
        measurements=[tl.measurement(e, {"val_accuracy": 0.9}) for e in range(1, 10)],
    )
    rungs = Rungs(ASHA, [done])
    assert rungs.judge("2", {1: 0.5}) == 1  # a resumed study knows trial 1's rung value


def test_a_trial_stopped_at_a_rung_is_never_picked():
    def trial(tid: str, value: float, local: dict) -> dict:
        return tl.make_trial(
            tid,
            {"num_units": 64},
            state=TrialState.SUCCEEDED,
            final_measurement=tl.measurement(3, {"val_accuracy": value}),
            local=local,
        )

    trials = [
        trial("1", 0.95, {"earlyStopped": True, "rung": 3}),
        trial("2", 0.80, {"earlyStopped": False}),
    ]
    assert progress_lines.trial_line(trials[0]).startswith("trial 1 stopped at rung 3")
    rows = trial_report.trial_rows(trials, Metric("val_accuracy", "maximize"))
    assert {r.trial_id: r.note for r in rows}["1"] == "stopped at rung 3 (not picked)"
    assert selection.select_best_trial(trials, metric_id="val_accuracy").trial_id == "2"


def test_several_objectives_are_halved_on_the_primary_said_in_one_line():
    line = halving.halving_line(Halving("asha", 1, 3, 9, "val_accuracy"), 2)
    assert "ranks the primary, val_accuracy" in line
    assert "\n" not in line


def _lines_per_step(trial: dict) -> Counter:
    """How many times the trainer reported each epoch, over every attempt of the trial."""
    local = trial[tl.LOCAL_KEY]
    steps: Counter = Counter()
    for path in (local["metricFile"], local["metricFile"] + ".earlier"):
        if Path(path).exists():
            for line in Path(path).read_text().splitlines():
                steps[int(float(json.loads(line)["global_step"]))] += 1
    return steps


@pytest.mark.slow
def test_asha_trains_under_half_the_epochs_and_picks_a_full_trial(tmp_path, capsys):
    """The must-show, on the fake trainer: 9 trials, 9 epochs, η=3."""
    trials = study(
        tmp_path,
        "--epochs=9",
        "--sleep=0.3",
        max_trial_count=9,
        parallel_trial_count=2,
        study_spec_algorithm="RANDOM_SEARCH",
        scheduler="asha",
        rungs=(1, 3, 9),
    )
    assert all(tl.trial_state(t) == TrialState.SUCCEEDED for t in trials)  # pruned ≠ failed
    trained = halving.trial_epochs(trials)
    assert trained <= 0.45 * 81, trained
    for t in trials:
        assert set(_lines_per_step(t).values()) == {1}, t["id"]  # no epoch trained twice
    pruned = [t for t in trials if halving.pruned_at(t) is not None]
    full = [t for t in trials if halving.pruned_at(t) is None]
    assert pruned and full
    assert {halving.pruned_at(t) for t in pruned} <= {1, 3}
    for t in full:
        assert max(int(m["stepCount"]) for m in t["measurements"]) == 9
    best = selection.select_best_trial(trials, metric_id="val_accuracy")
    assert best.trial_id in {t["id"] for t in full}
    summary = json.loads((tmp_path / "study" / "study.json").read_text())
    assert summary["bestTrialId"] in {t["id"] for t in full}


def test_asha_without_a_top_rung_above_the_first_is_refused_before_any_trial(tmp_path):
    with pytest.raises(StudyError, match="scheduler=asha with min_epochs=3"):
        study(tmp_path, "--epochs=3", scheduler="asha", rungs=(3, 3, 3))
    assert not (tmp_path / "study" / "trials.json").exists()


@pytest.mark.slow
def test_hyperband_with_two_objectives_runs_and_marks_rungs(tmp_path):
    space = SearchSpace(
        parameters=SPACE.parameters,
        metrics=(Metric("val_accuracy", "maximize"), Metric("model_size_mb", "minimize")),
    )
    trials = study(
        tmp_path,
        "--epochs=4",
        "--sleep=0.3",
        "--cost",
        space=space,
        max_trial_count=6,
        parallel_trial_count=2,
        study_spec_algorithm="RANDOM_SEARCH",
        scheduler="hyperband",
        rungs=(1, 2, 4),
    )
    assert all(tl.trial_state(t) == TrialState.SUCCEEDED for t in trials)
    for t in trials:
        rung = halving.pruned_at(t)
        assert rung is None or rung in Halving("hyperband", 1, 2, 4, "m").rungs(
            (int(t["id"]) - 1) % 3
        )


def test_early_stopping_true_keeps_meaning_the_median_scheduler():
    assert Settings(early_stopping=True).study.scheduler == "median"
    assert Settings(scheduler="median").study.early_stopping is True
    assert Settings().study.scheduler == "none"


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_cloud_targets_refuse_successive_halving_in_one_line(tmp_path, target):
    settings = for_target(target, Settings(scheduler="asha"))
    with pytest.raises(SettingsError, match=r"^scheduler=asha: .*median.*local target$"):
        compile_pipeline(target, settings, tmp_path / "p.yaml")
    assert not (tmp_path / "p.yaml").exists()
    spec = compiled(tmp_path, target, Settings(scheduler="median"))  # median is mapped
    assert "scheduler" not in spec["root"]["inputDefinitions"]["parameters"]  # never dropped


def test_the_local_tune_step_reads_the_scheduler_and_its_rungs(tmp_path):
    spec = compiled(tmp_path, "local", Settings(scheduler="hyperband", min_epochs=2))
    tune = spec["root"]["dag"]["tasks"]["tune-locally"]["inputs"]["parameters"]
    for name in ("scheduler", "min_epochs", "reduction_factor", "epochs"):
        assert tune[name] == {"componentInputParameter": name}
    defaults = spec["root"]["inputDefinitions"]["parameters"]
    assert defaults["scheduler"]["defaultValue"] == "hyperband"
    assert defaults["min_epochs"]["defaultValue"] == 2
