"""Continuing a study: the whole refusal line, trials without parameters, order-free configs.

Written to kill mutmut's survivors in `pipelines/study/continuation.py` (docs/mutation.md).
"""

from __future__ import annotations

import optuna
import pytest

from pipelines.study import continuation, optuna_study
from pipelines.study import trials as tl
from pipelines.study.continuation import ContinuationError
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.study.trials import TrialState
from tests.test_continuation import DEFAULTS, FOUR, SPACE, TODAY, earlier, trial


def test_two_objectives_that_differ_are_listed_whole_in_the_refusal():
    mine = [("val_accuracy", "maximize"), ("latency_ms", "minimize")]
    with pytest.raises(ContinuationError) as err:
        continuation.reconcile(earlier(FOUR, mine), SPACE, TODAY, DEFAULTS)
    assert str(err.value) == (
        "continue_from=runs/first: its objectives (val_accuracy maximize, latency_ms minimize) "
        "differ from today's (val_accuracy maximize); a study continues only with the same "
        "metrics and goals"
    )


def test_an_earlier_trial_written_without_parameters_joins_the_cloud_artifact():
    # Vertex's Trial JSON leaves an empty list out: a trial that never got parameters.
    bare = {
        k: v
        for k, v in tl.make_trial("first:9", {}, state=TrialState.INFEASIBLE).items()
        if k != "parameters"
    }
    own = [
        tl.make_trial("1", {"learning_rate": 0.01, "num_units": 128.0}, state=TrialState.SUCCEEDED)
    ]
    combined = continuation.combine([bare, *own], own)
    assert [t["id"] for t in combined] == ["first:9", "1"]
    assert combined[0]["parameters"] == []


def test_a_configuration_measured_earlier_is_skipped_whatever_order_its_parameters_came_in():
    tiny = SearchSpace(
        parameters=(
            Parameter("a", "categorical", values=("x", "y")),
            Parameter("b", "discrete", values=(1, 2)),
        )
    )
    # The earlier run wrote its parameters b first; today's sampler proposes a first.
    measured = {
        continuation.config_key(c)
        for c in ({"b": 1, "a": "x"}, {"b": 2, "a": "x"}, {"b": 1, "a": "y"})
    }
    for seed in range(5):
        created = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
        _, params = optuna_study.ask_new(created, tiny.parameters, measured)
        assert params == {"a": "y", "b": 2}


@pytest.mark.parametrize(
    ("source", "label"),
    [
        ("runs/first", "first"),
        ("runs/2024/first/", "first"),
        ("/abs/runs/first", "first"),
        ("trials.json", "trials"),
        ("json.backup", "json.backup"),
        ("projects/p/locations/l/pipelineJobs/run 7", "run-7"),
        ("-weird-", "weird"),
        ("///", "earlier"),
        ("runs/X-ray-X", "X-ray-X"),  # its own ends are kept
    ],
)
def test_a_runs_label_is_its_last_path_part_made_id_safe(source, label):
    assert continuation.label_of(source) == label
    got = continuation.reconcile(earlier(FOUR, source=source), SPACE, TODAY, DEFAULTS)
    assert got.trials[0]["id"] == f"{label}:1" and got.source == source
    assert continuation.origin(got.trials[0]) == label


def test_a_trial_continued_twice_keeps_its_first_runs_origin_and_extras():
    first = continuation.reconcile(earlier(FOUR), SPACE, TODAY, DEFAULTS).trials
    first[1][tl.LOCAL_KEY].update(earlyStopped=True, precision="mixed_bfloat16", other=1)
    again = continuation.reconcile(earlier(first, source="runs/second"), SPACE, TODAY, DEFAULTS)
    assert again.trials[1]["id"] == "first:2" and continuation.origin(again.trials[1]) == "first"
    assert again.trials[1][tl.LOCAL_KEY] == {
        continuation.CONTINUED_KEY: "runs/first",
        "earlyStopped": True,
        "precision": "mixed_bfloat16",
    }
    assert again.trials[0][tl.LOCAL_KEY] == {continuation.CONTINUED_KEY: "runs/first"}


def test_the_notes_name_every_trial_dropped_and_every_removed_parameter():
    trials = [
        trial(1, {"learning_rate": 0.5, "num_units": 64}, 0.7),  # outside today's range
        trial(2, {"learning_rate": 0.01, "num_units": 100}, 0.7),  # not a value today
        trial(3, {"learning_rate": 0.01, "num_units": 64}, state=TrialState.ACTIVE),
        trial(4, {"learning_rate": 0.01, "num_units": 64}, state=TrialState.STOPPING),
        trial(5, {"learning_rate": 0.01, "num_units": 64}, 0.8),
    ]
    got = continuation.reconcile(earlier(trials), SPACE, TODAY, DEFAULTS)
    assert [t["id"] for t in got.trials] == ["first:5"]
    assert "rule changed range: 2 earlier trial(s) outside today's search space dropped (1, 2)" in (
        got.notes
    )
    assert "rule unfinished: 2 earlier trial(s) not finished dropped (3, 4)" in got.notes
    old = [trial(1, {"learning_rate": 0.01, "num_units": 64, "dropout": 0.2, "width": 3}, 0.7)]
    with pytest.raises(ContinuationError) as err:
        continuation.reconcile(earlier(old), SPACE, TODAY, DEFAULTS)
    assert str(err.value).startswith("continue_from=runs/first: parameter(s) dropout, width of")


def test_a_new_parameter_without_a_default_is_refused_naming_the_run():
    space = SearchSpace((*SPACE.parameters, Parameter("width", "integer", min=1, max=4)))
    with pytest.raises(ContinuationError) as err:
        continuation.reconcile(earlier(FOUR), space, TODAY, DEFAULTS)
    assert str(err.value) == (
        "continue_from=runs/first: parameter 'width' is new in today's search space and has no "
        "default to give the earlier trials; expected a trainer flag with a default"
    )


INSIDE = {
    "a category today has": (Parameter("o", "categorical", values=("sgd", "adam")), "adam", True),
    "a category today lacks": (Parameter("o", "categorical", values=("sgd",)), "adam", False),
    "no value": (Parameter("o", "categorical", values=("None",)), None, False),
    "not a number": (Parameter("n", "integer", min=1, max=4), "three", False),
    "infinite": (Parameter("x", "double", min=0.0, max=1.0), float("inf"), False),
    "NaN": (Parameter("x", "double", min=0.0, max=1.0), float("nan"), False),
    "a listed value": (Parameter("u", "discrete", values=(0.1, 0.5)), 0.1 + 1e-12, True),
    "between listed values": (Parameter("u", "discrete", values=(0.1, 0.5)), 0.3, False),
    "near a listed value": (Parameter("u", "discrete", values=(100, 200)), 100.00001, False),
    "a fraction for an integer": (Parameter("n", "integer", min=1, max=4), 2.5, False),
    "an integer's bounds": (Parameter("n", "integer", min=1, max=4), 4, True),
    "a double's low bound": (Parameter("x", "double", min=0.1, max=1.0), 0.1, True),
    "a double's high bound": (Parameter("x", "double", min=0.1, max=1.0), 1.0, True),
}


@pytest.mark.parametrize("case", INSIDE, ids=list(INSIDE))
def test_an_earlier_value_joins_only_if_todays_space_could_propose_it(case):
    p, value, joins = INSIDE[case]
    got = continuation.reconcile(
        earlier([trial(1, {p.parameter_id: value}, 0.7), trial(2, {}, 0.6)]),
        SearchSpace((p,)),
        TODAY,
        {p.parameter_id: p.feasible_values()[0] if p.type != "double" else p.min},
    )
    assert ("first:1" in [t["id"] for t in got.trials]) is joins


def test_a_conditional_child_of_an_earlier_trial_follows_its_parent_today():
    space = SearchSpace(
        (
            Parameter(
                "optimizer",
                "categorical",
                values=("sgd", "adam"),
                conditional=(
                    Parameter("momentum", "double", min=0.5, max=0.99, parent_values=("sgd",)),
                ),
            ),
        )
    )
    trials = [trial(1, {"optimizer": "sgd"}, 0.7), trial(2, {"optimizer": "adam"}, 0.6)]
    got = continuation.reconcile(earlier(trials), space, TODAY, {"momentum": 0.9})
    assert [tl.trial_parameters(t) for t in got.trials] == [
        {"optimizer": "sgd", "momentum": 0.9},
        {"optimizer": "adam"},
    ]
    assert got.notes[0] == (
        "rule added parameter: momentum is new since; 1 earlier trial(s) take its default 0.9"
    )
