"""Study budgets as a user meets them: the stop reason the summary names, and Vertex's spec."""

from __future__ import annotations

from pipelines.study import budgets
from pipelines.study import trials as tl
from pipelines.study.budgets import Budgets
from pipelines.study.search_space import Metric
from pipelines.study.trials import TrialState

ACCURACY = Metric("val_accuracy", "maximize")
LOSS = Metric("val_loss", "minimize")


def _trial(tid: str, state: TrialState, values: dict | None, end: str | None) -> dict:
    return tl.make_trial(
        tid,
        {},
        state=state,
        final_measurement=tl.measurement(3, values) if values is not None else None,
        end_time=end,
    )


def _ended(second: int) -> str:
    return f"2026-01-01T00:00:{second:02d}Z"


def test_no_budget_set_means_no_stopping_config_and_never_spent() -> None:
    none = Budgets()
    assert none.stopping_config() == {}
    assert none.time_left(10_000.0) is None
    stale = [_trial(str(i), TrialState.INFEASIBLE, None, _ended(i)) for i in range(5)]
    assert none.spent(stale, ACCURACY, 10_000.0) is None


def test_vertex_gets_the_wall_clock_in_whole_seconds_and_the_no_progress_count() -> None:
    assert Budgets(max_study_hours=0.5, max_trials_no_progress=3).stopping_config() == {
        "maximum_runtime_constraint": {"max_duration": "1800s"},
        "max_num_trials_no_progress": 3,
    }
    assert Budgets(max_study_hours=1 / 3600 * 1.4).stopping_config() == {
        "maximum_runtime_constraint": {"max_duration": "1s"}
    }
    only_trials = Budgets(max_trials_no_progress=2).stopping_config()
    assert only_trials == {"max_num_trials_no_progress": 2}
    assert type(only_trials["max_num_trials_no_progress"]) is int


def test_the_wall_clock_counts_down_to_zero_and_is_spent_exactly_at_its_end() -> None:
    hour = Budgets(max_study_hours=1.0)
    assert hour.time_left(600.0) == 3000.0
    assert hour.time_left(5000.0) == 0.0
    assert hour.spent([], ACCURACY, 3599.0) is None
    assert hour.spent([], ACCURACY, 3600.0) == "max_study_hours=1 spent"
    assert Budgets(max_study_hours=0.25).spent([], ACCURACY, 901.0) == (
        "max_study_hours=0.25 spent"
    )


def test_a_wall_clock_budget_alone_never_stops_a_study_for_stale_trials() -> None:
    stale = [_trial(str(i), TrialState.INFEASIBLE, None, _ended(i)) for i in range(4)]
    assert Budgets(max_study_hours=1.0).spent(stale, ACCURACY, 60.0) is None


def test_the_wall_clock_is_named_before_the_stale_trials_when_both_are_spent() -> None:
    stale = [_trial(str(i), TrialState.INFEASIBLE, None, _ended(i)) for i in range(4)]
    both = Budgets(max_study_hours=1.0, max_trials_no_progress=2)
    assert both.spent(stale, ACCURACY, 3600.0) == "max_study_hours=1 spent"
    assert both.spent(stale, ACCURACY, 10.0) == "max_trials_no_progress=2: 4 in a row"


def test_a_minimized_objective_progresses_when_it_falls_and_a_tie_is_no_progress() -> None:
    trials = [
        _trial("1", TrialState.SUCCEEDED, {"val_loss": 0.9}, _ended(1)),
        _trial("2", TrialState.SUCCEEDED, {"val_loss": 0.5}, _ended(2)),  # better: lower
        _trial("3", TrialState.SUCCEEDED, {"val_loss": 0.7}, _ended(3)),
        _trial("4", TrialState.SUCCEEDED, {"val_loss": 0.5}, _ended(4)),  # a tie: no progress
    ]
    assert budgets.trials_without_progress(trials, LOSS) == 2
    assert budgets.trials_without_progress(trials[:2], LOSS) == 0


def test_running_and_stopped_trials_are_not_counted_and_a_missing_value_is_no_progress() -> None:
    trials = [
        _trial("1", TrialState.SUCCEEDED, {"val_accuracy": 0.6}, _ended(1)),
        _trial("2", TrialState.ACTIVE, None, None),  # still running
        _trial("3", TrialState.STOPPING, {"val_accuracy": 0.9}, _ended(3)),
        _trial("4", TrialState.SUCCEEDED, {"val_loss": 0.1}, _ended(4)),  # no val_accuracy
    ]
    assert budgets.trials_without_progress(trials, ACCURACY) == 1
    first_best = [_trial("1", TrialState.SUCCEEDED, {"val_accuracy": 0.0}, _ended(1))]
    assert budgets.trials_without_progress(first_best, ACCURACY) == 0


def test_trials_without_an_end_time_count_before_those_that_ended() -> None:
    trials = [
        _trial("1", TrialState.SUCCEEDED, {"val_accuracy": 0.9}, _ended(1)),
        _trial("2", TrialState.SUCCEEDED, {"val_accuracy": 0.5}, None),
    ]
    # sorted first (no end time), then the 0.9 improves on it: nothing stale
    assert budgets.trials_without_progress(trials, ACCURACY) == 0


def test_a_budget_of_one_trial_without_progress_is_sent_to_vertex_and_stops_after_one() -> None:
    one = Budgets(max_trials_no_progress=1)
    assert one.stopping_config() == {"max_num_trials_no_progress": 1}
    trials = [
        _trial("1", TrialState.SUCCEEDED, {"val_accuracy": 0.8}, _ended(1)),
        _trial("2", TrialState.INFEASIBLE, None, _ended(2)),
    ]
    assert one.spent(trials[:1], ACCURACY, 0.0) is None
    assert one.spent(trials, ACCURACY, 0.0) == "max_trials_no_progress=1: 1 in a row"
