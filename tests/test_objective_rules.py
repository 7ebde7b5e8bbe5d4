"""The objective and constraint rules one by one, with the exact line a user reads.

Written for the mutants mutmut left alive in `pipelines/study/objectives.py`: a retired
name let through, a refusal listing the wrong names, early stopping refused for one
objective, a met constraint counted as missed, an objective written back with another goal.
"""

import pytest

from pipelines.study import objectives as rules
from pipelines.study.search_space import Metric
from trainer.contract import METRIC_TAGS


def test_a_retired_tag_is_refused_naming_its_new_name():
    with pytest.raises(rules.ObjectiveError) as err:
        rules.parse_objective("accuracy")
    assert str(err.value) == (
        "objectives=accuracy: say val_accuracy (the validation accuracy this tag always meant)"
    )


def test_an_empty_or_repeated_list_is_refused_in_one_line():
    with pytest.raises(rules.ObjectiveError) as err:
        rules.parse_objectives([])
    assert str(err.value) == "objectives=: expected at least one metric name"
    with pytest.raises(rules.ObjectiveError) as err:
        rules.parse_objectives(["val_loss", "val_loss"])
    assert str(err.value) == "objectives=val_loss,val_loss: val_loss given twice; name each once"


def test_a_constraint_on_a_metric_that_is_no_objective_names_the_objectives():
    objectives = (Metric("val_accuracy", "maximize"), Metric("val_loss", "minimize"))
    with pytest.raises(rules.ObjectiveError) as err:
        rules.parse_constraint("flops<=3", objectives)
    assert str(err.value) == (
        "constraints=flops<=3: flops is not an objective (val_accuracy, val_loss); add it to "
        "objectives so every trial reports it"
    )


def test_an_unknown_name_without_a_goal_lists_the_known_ones():
    with pytest.raises(rules.ObjectiveError) as err:
        rules.parse_objective("flops")
    assert str(err.value) == (
        f"objectives=flops: expected one of {', '.join(METRIC_TAGS)}, "
        "or flops:max|min for a team's own metric"
    )


def test_a_goal_suffix_is_read_and_a_bad_one_refused():
    assert rules.parse_objective("flops:min") == Metric("flops", "minimize")
    assert rules.parse_objective(" flops:max ") == Metric("flops", "maximize")
    with pytest.raises(rules.ObjectiveError) as err:
        rules.parse_objective("flops:down")
    assert str(err.value) == "objectives=flops:down: expected flops:max or flops:min"
    with pytest.raises(rules.ObjectiveError, match=r"^objectives=val_loss:max: "):
        rules.parse_objective("val_loss:max")  # the table says minimize
    with pytest.raises(rules.ObjectiveError, match=r"expected a metric name"):
        rules.parse_objective("9lives:max")


def test_objective_text_parses_back_to_the_same_objective():
    for text in ("val_accuracy", "val_loss", "latency_ms", "flops:min", "score:max"):
        metric = rules.parse_objective(text)
        assert rules.objective_text(metric) == text
        assert rules.parse_objective(rules.objective_text(metric)) == metric


def test_early_stopping_is_refused_with_several_objectives_only():
    rules.check_settings((), (), "val_accuracy", True)  # one objective: the median rule applies
    rules.check_settings(("val_accuracy",), (), "val_accuracy", True)
    with pytest.raises(rules.ObjectiveError) as err:
        rules.check_settings(("val_accuracy", "val_loss"), (), "val_accuracy", True)
    assert str(err.value) == (
        "early_stopping=True with 2 objectives: the median rule ranks one metric and "
        "multi-objective studies cannot prune; turn early stopping off"
    )


def test_a_primary_the_trainer_does_not_report_is_refused_naming_what_was_listed():
    with pytest.raises(rules.ObjectiveError) as err:
        rules.resolve(("flops:min", "val_accuracy"), (), "val_accuracy")
    assert str(err.value) == (
        "objectives=flops:min,val_accuracy: the primary flops must be a metric the trainer "
        f"reports ({', '.join(METRIC_TAGS)}); list a team's own metric after it"
    )
    with pytest.raises(rules.ObjectiveError) as err:
        rules.resolve(("val_loss", "flops:min"), (), "val_accuracy")
    assert str(err.value) == (
        "objectives=val_loss,flops:min: the first (primary) objective must be "
        "metric_tag=val_accuracy; set metric_tag to val_loss or leave it unset"
    )


def test_shortfall_is_zero_when_met_and_relative_to_the_bound_when_not():
    objectives = (Metric("val_accuracy", "maximize"), Metric("latency_ms", "minimize"))
    under = rules.parse_constraint("latency_ms<=20", objectives)
    assert under.shortfall(10.0) == 0.0 and under.shortfall(20.0) == 0.0
    assert under.shortfall(25.0) == pytest.approx(0.25)
    over = rules.parse_constraint("val_accuracy>=0.5", objectives)
    assert over.shortfall(0.9) == 0.0
    assert over.shortfall(0.4) == pytest.approx(0.2)
