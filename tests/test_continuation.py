"""Continuing a study from an earlier run: the rules, selection over both, the seeded study."""

from __future__ import annotations

import json

import optuna
import pytest

from pipelines.study import continuation, optuna_study, selection
from pipelines.study import trials as tl
from pipelines.study.continuation import ContinuationError, Earlier
from pipelines.study.sampler import suggest
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.study.trials import TrialState
from tests.test_local_study import study

TODAY = [("val_accuracy", "maximize")]
SPACE = SearchSpace(
    parameters=(
        Parameter("learning_rate", "double", min=1e-3, max=0.1, scale="log"),
        Parameter("num_units", "discrete", values=(64, 128, 256)),
    )
)
DEFAULTS = {"learning_rate": 0.01, "num_units": 128, "momentum": 0.9}


def trial(tid, params, value=None, state=TrialState.SUCCEEDED, curve=()):
    return tl.make_trial(
        str(tid),
        params,
        state=state,
        final_measurement=tl.measurement(3, {"val_accuracy": value}) if value is not None else None,
        measurements=[tl.measurement(i + 1, {"val_accuracy": v}) for i, v in enumerate(curve)],
    )


def earlier(trials, objectives=TODAY, source="runs/first"):
    return Earlier(source, continuation.label_of(source), trials, objectives)


FOUR = [
    trial(1, {"learning_rate": 0.01, "num_units": 64}, 0.70),
    trial(2, {"learning_rate": 0.05, "num_units": 128}, 0.80),
    trial(3, {"learning_rate": 0.002, "num_units": 256}, 0.60),
    trial(4, {"learning_rate": 0.02, "num_units": 64}, state=TrialState.INFEASIBLE),
]


# --------------------------------------------------------------------------- the rules


def test_earlier_trials_join_with_their_runs_label_and_still_parse_as_vertex_trials():
    got = continuation.reconcile(earlier(FOUR), SPACE, TODAY, DEFAULTS)
    assert [t["id"] for t in got.trials] == ["first:1", "first:2", "first:3", "first:4"]
    for t in got.trials:
        tl.validate_trial(t)  # the id is a string in Vertex's Trial: the strict parse passes
        assert continuation.origin(t) == "first"
        assert t[tl.LOCAL_KEY][continuation.CONTINUED_KEY] == "runs/first"
    assert got.notes == [
        "continuing from runs/first: 4 earlier trial(s) (3 succeeded) join the study as first:<id>"
    ]
    assert continuation.origin({"id": "3"}) == ""
    again = continuation.reconcile(
        earlier(got.trials, source="runs/second"), SPACE, TODAY, DEFAULTS
    )
    assert [t["id"] for t in again.trials][:1] == ["first:1"]  # continued twice: keeps its origin


@pytest.mark.parametrize(
    "objectives, why",
    [
        ([("val_accuracy", "minimize")], "val_accuracy minimize"),
        ([("val_loss", "minimize")], "val_loss minimize"),
        ([("val_accuracy", "maximize"), ("latency", "minimize")], "latency minimize"),
    ],
)
def test_other_objectives_are_refused_in_one_line(objectives, why):
    with pytest.raises(ContinuationError) as err:
        continuation.reconcile(earlier(FOUR, objectives), SPACE, TODAY, DEFAULTS)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("continue_from=runs/first: its objectives (")
    assert why in message and "today's (val_accuracy maximize)" in message


def test_a_trials_file_records_no_goals_so_its_metrics_are_checked_and_a_note_says_so():
    got = continuation.reconcile(earlier(FOUR, None, "t.json"), SPACE, TODAY, DEFAULTS)
    assert got.notes[0] == (
        "objectives: t.json records no goals (a trials file); its trials are read as "
        "val_accuracy maximize"
    )
    with pytest.raises(ContinuationError, match=r"report no 'val_loss' \(today's objective\)"):
        continuation.reconcile(earlier(FOUR, None), SPACE, [("val_loss", "minimize")], DEFAULTS)


def test_a_parameter_removed_since_is_refused():
    old = [trial(1, {"learning_rate": 0.01, "num_units": 64, "dropout": 0.2}, 0.7)]
    with pytest.raises(ContinuationError) as err:
        continuation.reconcile(earlier(old), SPACE, TODAY, DEFAULTS)
    assert str(err.value) == (
        "continue_from=runs/first: parameter(s) dropout of its trials are not in today's search "
        "space (removed since); keep them in the space, or start a new study"
    )


def test_a_parameter_added_since_takes_its_default():
    wider = SearchSpace(
        parameters=(*SPACE.parameters, Parameter("momentum", "double", min=0.5, max=0.95))
    )
    got = continuation.reconcile(earlier(FOUR), wider, TODAY, DEFAULTS)
    assert {tl.trial_parameters(t)["momentum"] for t in got.trials} == {0.9}
    assert got.notes[0] == (
        "rule added parameter: momentum is new since; 4 earlier trial(s) take its default 0.9"
    )


def test_a_default_outside_the_new_range_drops_the_trials_that_would_take_it():
    wider = SearchSpace(
        parameters=(*SPACE.parameters, Parameter("momentum", "double", min=0.5, max=0.8))
    )
    with pytest.raises(ContinuationError, match="none of its 4 trial"):
        continuation.reconcile(earlier(FOUR), wider, TODAY, DEFAULTS)


def test_a_changed_range_drops_the_trials_outside_it_with_a_note():
    narrower = SearchSpace(
        parameters=(
            Parameter("learning_rate", "double", min=5e-3, max=0.1, scale="log"),
            Parameter("num_units", "discrete", values=(64, 128)),
        )
    )
    got = continuation.reconcile(earlier(FOUR), narrower, TODAY, DEFAULTS)
    assert [t["id"] for t in got.trials] == ["first:1", "first:2", "first:4"]
    assert (
        "rule changed range: 1 earlier trial(s) outside today's search space dropped (3)"
        in got.notes
    )


def test_unfinished_trials_are_dropped_and_nothing_left_is_refused():
    running = trial(5, {"learning_rate": 0.01, "num_units": 64}, state=TrialState.ACTIVE)
    got = continuation.reconcile(earlier([*FOUR, running]), SPACE, TODAY, DEFAULTS)
    assert "rule unfinished: 1 earlier trial(s) not finished dropped (5)" in got.notes
    with pytest.raises(ContinuationError) as err:
        continuation.reconcile(earlier([running]), SPACE, TODAY, DEFAULTS)
    assert str(err.value) == (
        "continue_from=runs/first: none of its 1 trial(s) fits today's study; nothing to "
        "continue from"
    )


# --------------------------------------------------------------------------- selection


def new_trials(best: float) -> list[dict]:
    return [
        trial(1, {"learning_rate": 0.03, "num_units": 256}, best),
        trial(2, {"learning_rate": 0.004, "num_units": 64}, 0.65),
    ]


@pytest.mark.parametrize("best_new, expected", [(0.75, "first:2"), (0.9, "1")])
def test_the_pick_is_the_best_of_earlier_and_new_trials_by_the_one_rule(best_new, expected):
    old = continuation.reconcile(earlier(FOUR), SPACE, TODAY, DEFAULTS).trials
    both = continuation.combine(old, new_trials(best_new))
    assert len(both) == 6
    pick = selection.select_best_trial(both, metric_id="val_accuracy", goal="maximize")
    assert pick.trial_id == expected
    assert pick.considered == 5  # the failed earlier trial is not a candidate
    # The local tune step's artifact already holds the earlier trials: not counted twice.
    assert continuation.combine(old, both) == both


def test_the_select_component_chooses_over_the_continued_trials(tmp_path):
    from kfp import dsl

    from components.select_best_trial import select_best_trial

    old = continuation.reconcile(earlier(FOUR), SPACE, TODAY, DEFAULTS).trials
    path = tmp_path / "trials.json"
    tl.write_trials(str(path), new_trials(0.75))
    trials_in = dsl.Artifact(uri=str(path))
    summary = dsl.Metrics(uri=str(tmp_path / "summary"))
    as_kfp = json.dumps(old).replace('"state": 4', '"state": 4.0').replace(": 128", ": 128.0")
    floats = json.loads(as_kfp)  # numbers inside a list parameter arrive as floats
    got = select_best_trial.python_func(
        trials=trials_in,
        dataset=dsl.Dataset(uri=str(tmp_path / "data"), metadata={"num_classes": 2}),
        study_spec_metrics=SPACE.to_study_spec_metrics(),  # val_accuracy, maximised
        constraints=[],
        threshold=0.0,
        use_threshold=False,
        continued_trials=floats,
        summary=summary,
    )
    assert got.best_trial_id == "first:2"
    assert got.best_parameters == {"learning_rate": 0.05, "num_units": 128}  # not 128.0
    assert type(got.best_parameters["num_units"]) is int
    assert summary.metadata["continued_from"] == ["runs/first"]


# --------------------------------------------------------------------------- the seeded study


def first_asks(trials, seed=0, n=3):
    """The first `n` configurations a study seeded with `trials` proposes."""
    created = optuna_study.make_optuna_study(
        SPACE,
        trials,
        algorithm="ALGORITHM_UNSPECIFIED",
        seed=seed,
        max_trial_count=4,
        early_stopping=None,
    )
    asks = []
    for _ in range(n):
        frozen = created.ask()
        asks.append(suggest(frozen, SPACE.parameters))
        created.tell(frozen, 0.5)
    return asks, created


def test_seeded_study_learns_the_earlier_trials_and_starts_elsewhere_than_a_fresh_one():
    with_curves = [
        trial(t["id"], tl.trial_parameters(t), v, curve=(0.3, 0.4))
        for t, v in zip(FOUR[:3], (0.6, 0.7, 0.8), strict=True)
    ]
    old = continuation.reconcile(earlier(with_curves), SPACE, TODAY, DEFAULTS).trials
    seeded, created = first_asks(old)
    fresh, _ = first_asks([])
    assert seeded != fresh
    replayed = created.get_trials()[:3]
    assert [t.state for t in replayed] == [optuna.trial.TrialState.COMPLETE] * 3
    assert replayed[1].values == [0.7] and replayed[1].intermediate_values == {1: 0.3, 2: 0.4}


def test_ask_new_skips_configurations_already_measured():
    tiny = SearchSpace(
        parameters=(
            Parameter("a", "categorical", values=("x", "y")),
            Parameter("b", "discrete", values=(1, 2)),
        )
    )
    measured = {
        continuation.config_key(c)
        for c in ({"a": "x", "b": 1}, {"a": "x", "b": 2}, {"a": "y", "b": 1})
    }
    for seed in range(5):
        created = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
        _, params = optuna_study.ask_new(created, tiny.parameters, measured)
        assert params == {"a": "y", "b": 2}


def test_a_continued_local_study_proposes_no_configuration_already_measured(tmp_path):
    tiny = SearchSpace(
        parameters=(
            Parameter("learning_rate", "discrete", values=(0.01, 0.1)),
            Parameter("num_units", "discrete", values=(64, 128, 256)),
        )
    )
    first = study(tmp_path / "a", "--epochs=1", space=tiny, max_trial_count=4)
    old = continuation.reconcile(earlier(first), tiny, TODAY, DEFAULTS).trials
    second = study(tmp_path / "b", "--epochs=1", space=tiny, max_trial_count=2, earlier_trials=old)
    configs = [continuation.config_key(tl.trial_parameters(t)) for t in [*first, *second]]
    assert len(set(configs)) == 6  # the 2 new trials are the 2 configurations left
    assert [t["id"] for t in second] == ["1", "2"]  # this study's own ids and budget


def test_a_continued_study_extends_in_place_without_rerunning(tmp_path):
    old = continuation.reconcile(earlier(FOUR), SPACE, TODAY, DEFAULTS).trials
    first = study(tmp_path, "--epochs=1", space=SPACE, max_trial_count=2, earlier_trials=old)
    more = study(tmp_path, "--epochs=1", space=SPACE, max_trial_count=3, earlier_trials=old)
    assert [t["id"] for t in more] == ["1", "2", "3"]
    assert more[:2] == first  # finished trials are kept, not rerun


def test_the_continued_local_study_starts_from_the_earlier_trials_not_from_the_seed(tmp_path):
    old = continuation.reconcile(earlier(FOUR), SPACE, TODAY, DEFAULTS).trials
    fresh = study(tmp_path / "a", "--epochs=1", space=SPACE, max_trial_count=1)
    seeded = study(tmp_path / "b", "--epochs=1", space=SPACE, max_trial_count=1, earlier_trials=old)
    assert tl.trial_parameters(seeded[0]) != tl.trial_parameters(fresh[0])
