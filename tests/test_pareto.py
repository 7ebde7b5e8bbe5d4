"""Several objectives: constraints, the Pareto front and the pick on hand-made trials."""

import re

import pytest

from pipelines.study.objectives import ObjectiveError, parse_constraints, parse_objectives
from pipelines.study.selection import SelectionError, dominates, pareto_front, select_best_trial

ACC_SIZE = parse_objectives(["val_accuracy", "model_size_mb"])  # minimised: the table's


def trial(trial_id, state=4, **values):
    metrics = {
        k: v for k, v in values.items() if k in ("val_accuracy", "val_loss", "model_size_mb")
    }
    params = {k: v for k, v in values.items() if k not in metrics}
    return {
        "id": str(trial_id),
        "state": state,
        "parameters": [{"parameterId": k, "value": v} for k, v in params.items()],
        "finalMeasurement": {"metrics": [{"metricId": k, "value": v} for k, v in metrics.items()]},
    }


TRIALS = [
    trial(1, val_accuracy=0.95, model_size_mb=40.0, num_units=512),  # most accurate, biggest
    trial(2, val_accuracy=0.90, model_size_mb=10.0, num_units=128),  # on the front
    trial(3, val_accuracy=0.88, model_size_mb=12.0, num_units=128),  # dominated by 2
    trial(4, val_accuracy=0.90, model_size_mb=10.0, num_units=64),  # ties 2: cheaper
    trial(5, val_accuracy=0.70, model_size_mb=2.0, num_units=32),  # smallest: on the front
    trial(6, state=5, val_accuracy=0.99, model_size_mb=1.0),  # failed: never counted
    trial(7, val_accuracy=0.99),  # reports one objective only: not comparable
]


def test_dominance_needs_no_worse_everywhere_and_better_once():
    goals = ["maximize", "minimize"]
    assert dominates([0.9, 10.0], [0.88, 12.0], goals)
    assert not dominates([0.9, 10.0], [0.9, 10.0], goals)  # equal: neither dominates
    assert not dominates([0.95, 40.0], [0.9, 10.0], goals)  # a trade-off
    assert dominates([0.9, 10.0], [0.9, 10.0000001], goals) is False  # equal at 6 digits


def test_front_keeps_trade_offs_and_ties_and_drops_the_dominated():
    values = {"1": [0.95, 40.0], "2": [0.9, 10.0], "3": [0.88, 12.0], "4": [0.9, 10.0]}
    assert pareto_front(values, ["maximize", "minimize"]) == ["1", "2", "4"]


def test_pick_is_the_best_primary_on_the_front_and_says_why():
    best = select_best_trial(TRIALS, objectives=ACC_SIZE)
    assert best.trial_id == "1" and best.metric == 0.95
    assert best.metrics == {"val_accuracy": 0.95, "model_size_mb": 40.0}
    assert set(best.front) == {"1", "2", "4", "5"} and best.front[0] == "1"
    assert best.considered == 5  # 6 failed, 7 lacks model_size_mb
    assert "highest val_accuracy" in best.reason and "front of 4" in best.reason


def test_a_constraint_excluding_the_most_accurate_picks_the_cheaper_tie_on_the_front():
    constraints = parse_constraints(["model_size_mb<=20"], ACC_SIZE)
    best = select_best_trial(TRIALS, objectives=ACC_SIZE, constraints=constraints)
    assert best.trial_id == "4"  # ties 2 on both objectives; 64 units < 128
    assert "1" not in best.front and best.front[:2] == ("4", "2")
    assert best.constraints == ("model_size_mb<=20",)
    assert "4 of 5 meeting model_size_mb<=20" in best.reason


def test_no_trial_meets_the_constraints_names_the_closest():
    constraints = parse_constraints(["model_size_mb<1"], ACC_SIZE)
    with pytest.raises(
        SelectionError, match=r"closest is trial 5 with model_size_mb=2 \(needs <1\)"
    ):
        select_best_trial(TRIALS, objectives=ACC_SIZE, constraints=constraints)


def test_a_minimised_primary_objective_picks_the_lowest():
    objectives = parse_objectives(["val_loss", "val_accuracy"])
    trials = [
        trial(1, val_loss=0.30, val_accuracy=0.90),
        trial(2, val_loss=0.20, val_accuracy=0.85),
        trial(3, val_loss=0.40, val_accuracy=0.80),  # dominated by 1
    ]
    best = select_best_trial(trials, objectives=objectives)
    assert best.trial_id == "2" and set(best.front) == {"1", "2"}
    assert "lowest val_loss" in best.reason


def test_the_threshold_still_applies_to_the_pick():
    with pytest.raises(SelectionError, match="best trial 1 has val_accuracy=0.9500"):
        select_best_trial(TRIALS, objectives=ACC_SIZE, threshold=0.97)


@pytest.mark.parametrize(
    ("objectives", "constraints", "message"),
    [
        (["f1"], [], "or f1:max|min for a team's own metric"),
        (["val_loss:max"], [], "val_loss is only ever minimized"),
        (["val_accuracy", "f1:best"], [], "expected f1:max or f1:min"),
        (["val_accuracy", "val_accuracy"], [], "val_accuracy given twice"),
        (["val_accuracy"], ["latency_ms<=20"], "latency_ms is not an objective"),
        (["val_accuracy"], ["val_accuracy=0.9"], "expected METRIC<=NUMBER"),
        (["val_accuracy"], ["val_accuracy>=high"], "expected a finite number after >="),
    ],
)
def test_bad_objectives_and_constraints_are_refused_in_one_line(objectives, constraints, message):
    with pytest.raises(ObjectiveError, match=re.escape(message)) as err:
        parse_constraints(constraints, parse_objectives(objectives))
    assert "\n" not in str(err.value)


def test_goals_come_from_the_one_table_or_the_suffix():
    objectives = parse_objectives(["val_accuracy", "val_loss", "f1:max", "cost:min"])
    assert [o.goal for o in objectives] == ["maximize", "minimize", "maximize", "minimize"]


def test_a_tie_on_the_primary_goes_to_the_trial_that_dominates_before_the_cheaper_one():
    trials = [
        trial(1, val_accuracy=0.9, model_size_mb=20.0, num_units=64),  # cheaper, but bigger
        trial(2, val_accuracy=0.9, model_size_mb=10.0, num_units=128),  # dominates 1
    ]
    best = select_best_trial(trials, objectives=ACC_SIZE)
    assert best.trial_id == "2" and best.front == ("2",)


def test_the_pareto_plot_draws_the_front_the_constraint_and_stars_the_pick(tmp_path, monkeypatch):
    from pipelines.reports import plotting
    from pipelines.reports.pareto_plot import plot_pareto

    plt = plotting.pyplot()
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to read it back
    cap = parse_constraints(["model_size_mb<=12"], ACC_SIZE)
    best = select_best_trial(TRIALS, objectives=ACC_SIZE, constraints=cap)
    assert plot_pareto(TRIALS, ACC_SIZE, cap, tmp_path / "p.png").is_file()
    (ax,) = figures[0].axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    star = lines[f"pick: trial {best.trial_id}"]
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (
        best.metrics["model_size_mb"],
        best.metrics["val_accuracy"],
    )
    front = lines["Pareto front (meets constraints)"]
    sizes = {t["id"]: t["finalMeasurement"]["metrics"][1]["value"] for t in TRIALS[:5]}
    assert list(front.get_xdata()) == sorted(sizes[i] for i in best.front)
    assert list(lines["constraint model_size_mb<=12"].get_xdata()) == [12, 12]  # vertical
    assert ax.get_xlabel() == "model_size_mb (minimize)"
