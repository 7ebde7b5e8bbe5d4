"""A minimized metric through the local study, and what resume and early stopping promise.

The fake trainer's `--falling` reports `1 - value` as `val_loss`: it falls with the epochs and
is lowest at the fake objective's optimum, so a loss study has a known right answer.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import optuna
import pytest

from pipelines.study import optuna_study, sampler
from pipelines.study import trials as tl
from pipelines.study.measurements import best_trial
from pipelines.study.search_space import Metric, SearchSpace
from pipelines.study.selection import SelectionError, select_best_trial
from pipelines.study.trials import TrialState
from pipelines.targets.kubeflow import experiment as katib
from pipelines.targets.local.local_study import EarlyStopping
from tests.fake_trainer import epoch_value, objective
from tests.test_local_study import SPACE, states, study

LOSS = Metric("val_loss", "minimize")
LOSS_SPACE = SearchSpace(parameters=SPACE.parameters, metrics=(LOSS,))
LOSS_TRAINER = ("--metric_tag=val_loss", "--falling")


def optuna_loss_study(algorithm: str, seed: int, n: int, early: EarlyStopping | None = None):
    return optuna_study.make_optuna_study(
        LOSS_SPACE, [], algorithm=algorithm, seed=seed, max_trial_count=n, early_stopping=early
    )


def searched_losses(seed: int, n: int) -> list[float]:
    """Losses of `n` trials asked of the study `make_optuna_study` builds for a loss space."""
    study_ = optuna_loss_study("ALGORITHM_UNSPECIFIED", seed, n)
    losses = []
    for _ in range(n):
        trial = study_.ask()
        loss = 1.0 - objective(sampler.suggest(trial, LOSS_SPACE.parameters))
        study_.tell(trial, loss)
        losses.append(loss)
    return losses


def test_a_loss_study_searches_toward_low_losses():
    """TPE, once past its start-up, proposes lower losses than the start-up's random draws."""
    n = 24
    for seed in range(3):
        losses = searched_losses(seed, n)
        start_up, guided = losses[: n // 3], losses[-n // 3 :]
        assert statistics.mean(guided) < statistics.mean(start_up) - 0.1, (seed, losses)


def run_optuna_trial(study_, values: list[float]) -> int | None:
    """Report `values` step by step as the local study does; the step it is stopped at."""
    trial = study_.ask()
    sampler.suggest(trial, LOSS_SPACE.parameters)
    for step, value in enumerate(values, start=1):
        trial.report(value, step)
        if trial.should_prune():
            study_.tell(trial, state=optuna.trial.TrialState.PRUNED)
            return step
    study_.tell(trial, values[-1])
    return None


def test_the_median_rule_waits_for_min_trials_then_judges_from_the_warmup_step():
    """min_trials completed trials before any stop; steps below warmup_steps never judged."""
    study_ = optuna_loss_study("RANDOM_SEARCH", 0, 10, EarlyStopping(min_trials=3, warmup_steps=2))
    good, bad = [0.5, 0.3, 0.2, 0.1], [0.9, 0.9, 0.9, 0.9]
    assert [run_optuna_trial(study_, good) for _ in range(2)] == [None, None]
    assert run_optuna_trial(study_, bad) is None  # 2 finished trials < min_trials: runs on
    assert run_optuna_trial(study_, bad) == 2  # 3 finished: judged from step 2 (the warmup)
    assert run_optuna_trial(study_, [0.4, 0.25, 0.15, 0.05]) is None  # below the median: kept


def test_local_early_stopping_defaults_are_katibs_medianstop_settings():
    """One study, two executors: the median rule starts at the same trial count and step."""
    local = EarlyStopping()
    assert (local.min_trials, local.warmup_steps) == (
        int(katib.MEDIANSTOP_SETTINGS["min_trials_required"]),
        int(katib.MEDIANSTOP_SETTINGS["start_step"]),
    )


@pytest.fixture(scope="module")
def loss_study(tmp_path_factory) -> list[dict]:
    """A loss study with early stopping, run by the local executor on the fake trainer."""
    return study(
        tmp_path_factory.mktemp("val_loss"),
        *LOSS_TRAINER,
        "--epochs=4",
        "--sleep=0.15",
        space=LOSS_SPACE,
        max_trial_count=8,
        parallel_trial_count=1,
        study_spec_algorithm="RANDOM_SEARCH",
        early_stopping=EarlyStopping(min_trials=2, warmup_steps=1),
        seed=3,
    )


def full_and_stopped(trials: list[dict]) -> tuple[list[dict], list[dict]]:
    stopped = [t for t in trials if t[tl.LOCAL_KEY]["earlyStopped"]]
    return [t for t in trials if t not in stopped], stopped


def test_a_loss_trial_keeps_its_lowest_measurement(loss_study):
    full, _ = full_and_stopped(loss_study)
    assert full and states(loss_study) == [TrialState.SUCCEEDED] * 8
    for trial in full:  # the loss falls every epoch: the best measurement is the last, lowest
        assert trial["finalMeasurement"]["stepCount"] == "4"
        expected = 1.0 - epoch_value(tl.trial_parameters(trial), 4)
        assert math.isclose(tl.final_metric(trial, "val_loss"), expected, rel_tol=1e-6)


def test_early_stopping_stops_the_trials_with_the_highest_losses(loss_study):
    full, stopped = full_and_stopped(loss_study)
    assert stopped, "nothing was stopped early"
    for trial in stopped:  # above the median loss of the finished trials at its step
        step = int(trial["finalMeasurement"]["stepCount"])
        assert step < 4
        earlier = [t for t in full if int(t["id"]) < int(trial["id"])]
        at_step = [tl.measurement_metrics(t["measurements"][step - 1])["val_loss"] for t in earlier]
        assert tl.final_metric(trial, "val_loss") > statistics.median(at_step)
    lowest = min(tl.final_metric(t, "val_loss") for t in full)
    assert all(tl.final_metric(t, "val_loss") > lowest for t in stopped)


def test_the_study_the_selection_and_the_report_agree_on_the_lowest_loss(loss_study):
    from pipelines.reports.trial_report import trial_rows

    lowest = min(loss_study, key=lambda t: tl.final_metric(t, "val_loss"))
    assert best_trial(loss_study, LOSS)["id"] == lowest["id"]
    assert (
        select_best_trial(loss_study, metric_id="val_loss", goal="minimize").trial_id
        == lowest["id"]
    )
    succeeded = [r.trial_id for r in trial_rows(loss_study, LOSS) if r.state == "SUCCEEDED"]
    assert succeeded[0] == lowest["id"]


def test_a_loss_threshold_is_an_upper_bound(loss_study):
    lowest = min(tl.final_metric(t, "val_loss") for t in loss_study)
    chosen = select_best_trial(loss_study, metric_id="val_loss", goal="minimize", threshold=lowest)
    assert chosen.metric == lowest
    with pytest.raises(SelectionError, match=r"missing the threshold \(<= "):
        select_best_trial(loss_study, metric_id="val_loss", goal="minimize", threshold=lowest / 2)


def read_lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_resume_never_reruns_a_failed_trial(tmp_path):
    """The README's "finished trials are not run again" holds for failed trials too."""
    starts = tmp_path / "starts.txt"
    args = ("--epochs=1", "--fail_at=1", "--fail_trials=2", f"--starts={starts}")
    options = dict(parallel_trial_count=1, max_failed_trial_count=3)
    first = study(tmp_path, *args, max_trial_count=3, **options)
    assert states(first) == [TrialState.SUCCEEDED, TrialState.INFEASIBLE, TrialState.SUCCEEDED]
    assert read_lines(starts) == ["1", "2", "3"]

    more = study(tmp_path, *args, max_trial_count=4, **options)

    assert read_lines(starts) == ["1", "2", "3", "4"]  # only the new trial ran
    assert more[:3] == first


def test_a_resumed_study_draws_new_values_not_the_first_runs_again(tmp_path):
    """The same seed on resume must not replay the first run's draws as new trials."""
    options = dict(parallel_trial_count=1, study_spec_algorithm="RANDOM_SEARCH")
    first = study(tmp_path, "--epochs=1", max_trial_count=3, **options)
    more = study(tmp_path, "--epochs=1", max_trial_count=6, **options)
    assert more[:3] == first
    drawn_first = {tl.trial_parameters(t)["learning_rate"] for t in first}
    drawn_after = {tl.trial_parameters(t)["learning_rate"] for t in more[3:]}
    assert len(drawn_after) == 3 and not drawn_after & drawn_first
