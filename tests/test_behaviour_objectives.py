"""Several objectives end to end: one list from the settings to every target and the selection.

A goal direction is decided once (the contract's table, or `name:max|min`); each test here
fails when one layer turns it around: the settings, Optuna's directions, Vertex's
`MetricSpec`, Katib's objective, or the selection.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from google.cloud.aiplatform_v1.types import StudySpec

from components.study_metric import study_metric
from pipelines.compiler import compile_pipeline
from pipelines.settings import Settings, SettingsError, load_settings
from pipelines.study import trials as tl
from pipelines.study.optuna_study import make_optuna_study
from pipelines.study.search_space import Metric, Parameter, SearchSpace
from pipelines.study.selection import SelectionError
from pipelines.targets.kubeflow.katib_rules import check_experiment
from tests.test_behaviour_threshold import select_as_compiled
from tests.test_kubeflow_katib import build
from tests.vertex_resolve import resolve_inputs

LOSS_FIRST = ("val_loss", "val_accuracy")


def trials_artifact(folder: Path, rows: list[tuple[float, float, int]]):
    """Succeeded trials with (val_loss, val_accuracy, num_units) each."""
    from types import SimpleNamespace

    trials = [
        tl.make_trial(
            str(i),
            {"num_units": units},
            state=tl.TrialState.SUCCEEDED,
            final_measurement=tl.measurement(3, {"val_loss": loss, "val_accuracy": acc}),
        )
        for i, (loss, acc, units) in enumerate(rows, start=1)
    ]
    path = folder / "trials.json"
    tl.write_trials(str(path), trials)
    return SimpleNamespace(uri=str(path), path=str(path), metadata={})


ROWS = [
    (0.30, 0.95, 512),  # 1: most accurate, not the lowest loss
    (0.20, 0.90, 128),  # 2: lowest loss
    (0.40, 0.85, 64),  # 3: dominated by 1 and 2
]


def test_a_minimised_primary_objective_is_picked_lowest_as_compiled(tmp_path):
    settings = Settings(objectives=LOSS_FIRST)
    assert settings.study.metric_tag == "val_loss" and settings.study.goal == "minimize"
    best = select_as_compiled(tmp_path, settings, trials_artifact(tmp_path, ROWS))
    assert (best.best_trial_id, best.best_metric) == ("2", 0.20)


def test_a_constraint_that_excludes_the_best_picks_another_as_compiled(tmp_path):
    settings = Settings(objectives=LOSS_FIRST, constraints=("val_accuracy>=0.93",))
    best = select_as_compiled(tmp_path, settings, trials_artifact(tmp_path, ROWS))
    assert best.best_trial_id == "1"  # the only one meeting the constraint


def test_an_impossible_constraint_stops_before_the_final_training_naming_the_closest(tmp_path):
    settings = Settings(objectives=LOSS_FIRST, constraints=("val_accuracy>=0.99",))
    with pytest.raises(SelectionError) as err:
        select_as_compiled(tmp_path, settings, trials_artifact(tmp_path, ROWS))
    message = str(err.value)
    assert "closest is trial 1 with val_accuracy=0.95 (needs >=0.99)" in message
    assert "stopping before the final training" in message and "\n" not in message


def cost_artifact(folder: Path, rows: list[tuple[float, float]]):
    """Succeeded trials with (val_accuracy, latency_ms) each."""
    from types import SimpleNamespace

    trials = [
        tl.make_trial(
            str(i),
            {"num_units": 64},
            state=tl.TrialState.SUCCEEDED,
            final_measurement=tl.measurement(3, {"val_accuracy": acc, "latency_ms": ms}),
        )
        for i, (acc, ms) in enumerate(rows, start=1)
    ]
    path = folder / "trials.json"
    tl.write_trials(str(path), trials)
    return SimpleNamespace(uri=str(path), path=str(path), metadata={})


@pytest.mark.parametrize(("constraint", "best"), [("latency_ms<20", "2"), ("latency_ms<=20", "1")])
def test_a_strict_constraint_refuses_a_trial_exactly_at_its_bound_as_compiled(
    tmp_path, constraint, best
):
    settings = Settings(objectives=("val_accuracy", "latency_ms"), constraints=(constraint,))
    trials = cost_artifact(tmp_path, [(0.95, 20.0), (0.90, 15.0)])  # 1: at the bound, better
    assert select_as_compiled(tmp_path, settings, trials).best_trial_id == best


def test_a_study_whose_only_trials_sit_on_a_strict_bound_stops_naming_it(tmp_path):
    settings = Settings(objectives=("val_accuracy", "latency_ms"), constraints=("latency_ms<20",))
    with pytest.raises(SelectionError) as err:
        select_as_compiled(tmp_path, settings, cost_artifact(tmp_path, [(0.95, 20.0)]))
    assert "the closest is trial 1 with latency_ms=20 (needs <20)" in str(err.value)


def test_settings_take_objectives_from_flags_yaml_and_metric_tag(tmp_path):
    assert Settings().study.objectives == ("val_accuracy",)
    assert Settings(metric_tag="val_loss").study.objectives == ("val_loss",)
    assert (
        load_settings(overrides={"objectives": "val_loss, val_accuracy"}).study.goal == "minimize"
    )
    config = tmp_path / "c.yaml"
    config.write_text("objectives: [val_accuracy, val_loss]\nconstraints: ['val_loss<=0.4']\n")
    s = load_settings(config=config, environ={})
    assert s.study.objectives == ("val_accuracy", "val_loss") and s.study.constraints == (
        "val_loss<=0.4",
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"objectives": "val_loss,val_accuracy", "metric_tag": "val_accuracy"},
            "the first (primary) objective must be metric_tag=val_accuracy",
        ),
        ({"objectives": "val_accuracy", "constraints": "latency_ms<=20"}, "not an objective"),
        (
            {"objectives": "val_accuracy,val_loss", "early_stopping": True},
            "early_stopping=True with 2 objectives",
        ),
        ({"objectives": "f1:max,val_accuracy"}, "the primary f1 must be a metric the trainer"),
    ],
)
def test_settings_refuse_in_one_line_before_anything_runs(overrides, message):
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings(overrides=overrides, environ={})


def test_a_team_metric_travels_as_an_objective_with_its_own_goal():
    s = Settings(objectives=("val_accuracy", "f1:max", "cost:min"), constraints=("cost<=3",))
    metrics, goal, _ = study_metric.python_func("val_accuracy", list(s.study.objectives), [])
    assert metrics == [
        {"metric_id": "val_accuracy", "goal": 1},
        {"metric_id": "f1", "goal": 1},
        {"metric_id": "cost", "goal": 2},
    ]


def _vertex_metric_specs(tmp_path: Path, settings: Settings) -> list[StudySpec.MetricSpec]:
    spec = yaml.safe_load(
        Path(compile_pipeline("vertex", settings, tmp_path / "v.yaml")).read_text()
    )
    metrics, *_ = study_metric.python_func(**resolve_inputs(spec, outputs={})["study-metric"])
    return [StudySpec.MetricSpec(m) for m in metrics]


def test_vertex_gets_one_metric_spec_per_objective_with_its_goal(tmp_path):
    specs = _vertex_metric_specs(tmp_path, Settings(objectives=LOSS_FIRST))
    assert [(m.metric_id, m.goal.name) for m in specs] == [
        ("val_loss", "MINIMIZE"),
        ("val_accuracy", "MAXIMIZE"),
    ]


def test_katib_objective_is_the_primary_with_the_others_as_additional_metrics():
    space = SearchSpace(
        (Parameter("num_units", "discrete", values=(64, 128)),),
        (Metric("val_loss", "minimize"), Metric("val_accuracy", "maximize")),
    )
    objective = build(space)["spec"]["objective"]
    check_experiment(build(space))
    assert objective["type"] == "minimize" and objective["objectiveMetricName"] == "val_loss"
    assert objective["additionalMetricNames"] == ["val_accuracy"]
    assert {s["name"]: s["value"] for s in objective["metricStrategies"]} == {
        "val_loss": "min",
        "val_accuracy": "max",
    }


def test_optuna_gets_one_direction_per_objective():
    space = SearchSpace(
        (Parameter("num_units", "discrete", values=(64, 128)),),
        (Metric("val_accuracy", "maximize"), Metric("val_loss", "minimize")),
    )
    study = make_optuna_study(
        space, [], algorithm="RANDOM_SEARCH", seed=0, max_trial_count=2, early_stopping=None
    )
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]


def test_a_local_study_of_two_objectives_carries_both_and_reports_the_front(tmp_path):
    """The fake trainer reports val_accuracy every epoch and a size (num_units / 100) at the end."""
    import json

    from typer.testing import CliRunner

    from pipelines.app.cli import app
    from pipelines.study.objectives import parse_constraints, parse_objectives
    from pipelines.study.selection import select_best_trial
    from tests.test_local_study import study

    objectives = parse_objectives(["val_accuracy", "model_size_mb:min"])
    space = SearchSpace(
        (
            Parameter("learning_rate", "double", min=1e-3, max=1.0, scale="log"),
            Parameter("num_units", "discrete", values=(32, 128, 512)),
        ),
        objectives,
    )
    trials = study(tmp_path, "--cost", space=space, max_trial_count=5)
    for t in trials:
        metrics = tl.measurement_metrics(t["finalMeasurement"])
        assert {"val_accuracy", "model_size_mb"} <= set(metrics)  # latency_ms too
        assert metrics["model_size_mb"] == tl.trial_parameters(t)["num_units"] / 100
    free = select_best_trial(trials, objectives=objectives)
    cap = parse_constraints(["model_size_mb<=1.28"], objectives)
    capped = select_best_trial(trials, objectives=objectives, constraints=cap)
    assert free.trial_id in free.front and capped.trial_id in capped.front
    assert capped.metrics["model_size_mb"] <= 1.28

    result = CliRunner().invoke(app, ["trials", str(tmp_path / "study"), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [o["metricId"] for o in data["objectives"]] == ["val_accuracy", "model_size_mb"]
    assert all(
        set(t["row"]["metrics"]) == {"val_accuracy", "model_size_mb"} for t in data["trials"]
    )
    result = CliRunner().invoke(
        app,
        ["trials", str(tmp_path / "study"), "--output", str(tmp_path / "r")],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "model_size_mb" in result.stdout.splitlines()[2]  # a column of the table
    assert (tmp_path / "r" / "pareto_front.png").is_file()
    assert f"front: {', '.join(free.front)}" in (tmp_path / "r" / "index.html").read_text()


def test_a_trial_reporting_the_primary_but_not_a_secondary_objective_fails_naming_it(tmp_path):
    """Without `--cost` the fake trainer reports val_accuracy only: no trial may succeed."""
    from pipelines.study.objectives import parse_objectives
    from pipelines.study.selection import select_best_trial
    from tests.test_local_study import study

    objectives = parse_objectives(["val_accuracy", "model_size_mb:min"])
    space = SearchSpace(
        (Parameter("learning_rate", "double", min=1e-3, max=1.0, scale="log"),), objectives
    )
    trials = study(tmp_path, space=space, max_trial_count=2, max_failed_trial_count=3)
    assert [tl.trial_outcome(t) for t in trials] == ["failed", "failed"]
    for t in trials:
        reason = t["infeasibleReason"]
        assert "reported no val_accuracy/model_size_mb metric" in reason
        assert "(metrics seen: val_accuracy)" in reason
    with pytest.raises(SelectionError, match="no succeeded trial reported the metric"):
        select_best_trial(trials, objectives=objectives)


def test_a_resumed_study_keeps_its_objectives_but_may_change_its_constraints(tmp_path):
    from pipelines.app import study_identity
    from pipelines.settings import LOCAL_RUN_DEFAULTS

    def settings(**values):
        return Settings(**{**LOCAL_RUN_DEFAULTS, "output": str(tmp_path / "out"), **values})

    from pipelines.study import trials as tl
    from pipelines.study.trials import TrialState

    def one_trial_done(output):  # a study that finished no trial is set aside, not refused
        done = [tl.make_trial("1", {}, state=TrialState.SUCCEEDED)]
        tl.write_trials(str(output / "study" / tl.TRIALS_FILE), done)

    out = tmp_path / "out"
    study_identity.check_and_record(settings(), out)  # one objective: recorded as before
    one_trial_done(out)
    assert "objectives" not in study_identity.identity(settings())
    with pytest.raises(
        SettingsError, match=r"objectives: '\(unset\)' → \['val_accuracy', 'val_loss'"
    ):
        study_identity.check_and_record(settings(objectives=("val_accuracy", "val_loss")), out)
    two = tmp_path / "two"
    study_identity.check_and_record(settings(objectives=("val_accuracy", "val_loss")), two)
    one_trial_done(two)
    assert "reused" in study_identity.check_and_record(
        settings(objectives=("val_accuracy", "val_loss"), constraints=("val_loss<=0.3",)), two
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"objectives": ["val_loss", "val_accuracy"]},
            "--param objectives=['val_loss', 'val_accuracy']: the first (primary) objective "
            "must be metric_tag=val_accuracy",
        ),
        (
            {"constraints": ["latency<3"]},
            "--param constraints=['latency<3']: latency is not an objective",
        ),
    ],
)
def test_a_bad_run_time_objective_or_constraint_is_refused_before_sending(
    tmp_path, overrides, message
):
    from pipelines.app.parameter_checks import check_parameters

    path = compile_pipeline(
        "vertex", Settings(objectives=("val_accuracy", "val_loss")), tmp_path / "v.yaml"
    )
    spec = yaml.safe_load(Path(path).read_text())
    with pytest.raises(SettingsError) as err:
        check_parameters(spec, overrides, overrides)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    check_parameters(spec, {"metric_tag": "val_loss", "objectives": ["val_loss"]}, {})
