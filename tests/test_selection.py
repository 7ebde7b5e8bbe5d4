"""Best-trial selection: goal, succeeded-only, ties toward the cheaper configuration, threshold."""

import pytest

from pipelines.study.selection import SelectionError, select_best_trial


def trial(trial_id, state=4, val_accuracy=None, val_loss=None, **params):
    metrics = [
        {"metricId": k, "value": v}
        for k, v in (("val_accuracy", val_accuracy), ("val_loss", val_loss))
        if v is not None
    ]
    return {
        "id": str(trial_id),
        "state": state,
        "parameters": [{"parameterId": k, "value": v} for k, v in params.items()],
        "finalMeasurement": {"metrics": metrics} if metrics else {},
    }


TRIALS = [
    trial(1, val_accuracy=0.80, val_loss=0.5, num_units=128, learning_rate=0.1),
    trial(2, val_accuracy=0.95, val_loss=0.3, num_units=512, learning_rate=0.01),
    trial(3, state=5, val_accuracy=0.99, num_units=64),  # INFEASIBLE (failed): never chosen
    trial(4, state="SUCCEEDED", val_accuracy=0.95, val_loss=0.3, num_units=64, learning_rate=0.05),
    trial(5, val_accuracy=None, num_units=64),  # reported nothing
]


def test_maximize_ignores_failed_trials_and_breaks_ties_toward_fewer_units():
    best = select_best_trial(TRIALS, metric_id="val_accuracy", goal="maximize")
    assert best.trial_id == "4"  # ties with 2 at 0.95; 64 units < 512
    assert best.parameters == {"num_units": 64, "learning_rate": 0.05}
    assert best.metric == 0.95 and best.considered == 3


def test_minimize():
    best = select_best_trial(TRIALS, metric_id="val_loss", goal="minimize")
    assert best.trial_id == "4"


def test_equal_metrics_tie_break_on_cost_whatever_else_trials_report():
    trials = [
        trial(1, val_accuracy=0.9, val_loss=0.2, num_units=512),
        trial(2, val_accuracy=0.9, val_loss=0.4, num_units=64),
    ]
    assert select_best_trial(trials, metric_id="val_accuracy").trial_id == "2"


def test_threshold_stops_with_a_clear_message():
    with pytest.raises(
        SelectionError,
        match=r"best trial 4 has val_accuracy=0.9500, missing the threshold \(>= 0.97\)",
    ):
        select_best_trial(TRIALS, metric_id="val_accuracy", threshold=0.97)
    assert select_best_trial(TRIALS, metric_id="val_accuracy", threshold=0.95).trial_id == "4"


def test_no_usable_trial():
    with pytest.raises(SelectionError, match="no succeeded trial reported the metric 'auc'"):
        select_best_trial(TRIALS, metric_id="auc")


def test_every_ranking_breaks_a_tie_the_same_way():
    """The study's best (progress line, study.json), the trials table and the selection agree:
    trial 2 ties trial 4 at 0.95 and 64 units is the cheaper configuration."""
    from pipelines.reports.trial_report import trial_rows
    from pipelines.study.measurements import best_trial
    from pipelines.study.search_space import Metric

    selected = select_best_trial(TRIALS, metric_id="val_accuracy", goal="maximize").trial_id
    assert selected == "4"
    assert best_trial(TRIALS, Metric("val_accuracy", "maximize"))["id"] == selected
    rows = trial_rows(TRIALS, Metric("val_accuracy", "maximize"))
    assert [r.trial_id for r in rows if r.state == "SUCCEEDED"][:2] == ["4", "2"]


def test_equal_trials_go_to_the_earliest_by_number_then_named_ids_last():
    """Trial 9 precedes trial 10 (not as text); an id that is no number comes after both."""
    trials = [
        trial(tid, val_accuracy=0.9, num_units=64) for tid in ("study-b", "10", "9", "study-a")
    ]
    best = select_best_trial(trials, metric_id="val_accuracy")
    assert (best.trial_id, best.considered) == ("9", 4)
    named = [trial(tid, val_accuracy=0.9, num_units=64) for tid in ("study-b", "study-a")]
    assert select_best_trial(named, metric_id="val_accuracy").trial_id == "study-a"


def test_the_cost_parameters_asked_for_break_the_tie():
    trials = [
        trial(1, val_accuracy=0.9, num_units=64, batch_size=128),
        trial(2, val_accuracy=0.9, num_units=512, batch_size=32),
    ]
    assert select_best_trial(trials, metric_id="val_accuracy").trial_id == "1"
    chosen = select_best_trial(trials, metric_id="val_accuracy", cost_parameters=("batch_size",))
    assert chosen.trial_id == "2"


def test_a_loss_threshold_is_an_upper_bound_reached_at_equality():
    assert select_best_trial(TRIALS, metric_id="val_loss", goal="minimize", threshold=0.3)
    assert select_best_trial(TRIALS, metric_id="val_loss", goal="minimize", threshold=0.35)
    with pytest.raises(
        SelectionError,
        match=r"^best trial 4 has val_loss=0.3000, missing the threshold \(<= 0.2\): stopping",
    ):
        select_best_trial(TRIALS, metric_id="val_loss", goal="minimize", threshold=0.2)


def test_an_unknown_goal_is_refused_naming_it():
    with pytest.raises(SelectionError, match=r"^goal='maximise': expected maximize or minimize$"):
        select_best_trial(TRIALS, metric_id="val_accuracy", goal="maximise")
