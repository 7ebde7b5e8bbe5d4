"""Continuing a study from an earlier run: the rules, the seeded study, selection, the sources."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from pipelines.settings import Settings
from pipelines.study import continuation, optuna_study, selection
from pipelines.study import trials as tl
from pipelines.study.continuation import ContinuationError, Earlier
from pipelines.study.sampler import suggest
from pipelines.study.search_space import Parameter, SearchSpace
from pipelines.study.trials import TrialState
from pipelines.targets import earlier_runs
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
        metric_tag="val_accuracy",
        goal="maximize",
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


# --------------------------------------------------------------------------- the sources


@pytest.mark.parametrize(
    "source, kind",
    [
        ("projects/p/locations/us-central1/hyperparameterTuningJobs/42", "vertex-hpt"),
        ("projects/p/locations/us-central1/pipelineJobs/hpt-pipeline-2026", "vertex-pipeline"),
        ("0f8e9a1c-1234-4abc-9def-0123456789ab", "kubeflow"),
    ],
)
def test_sources_are_recognised_offline(source, kind):
    assert earlier_runs.kind_of(source) == kind


@pytest.mark.parametrize("source", ["gs://b/trials.json", "projects/p/jobs/1", "no/such/folder"])
def test_an_unknown_source_is_refused_in_one_line(source):
    with pytest.raises(ContinuationError) as err:
        earlier_runs.kind_of(source)
    assert str(err.value) == f"continue_from={source}: expected {earlier_runs.EXPECTED}"


def test_a_trials_file_must_follow_vertex_trial_schema(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "1", "state": 4, "finalMeasurment": {}}]))
    with pytest.raises(ContinuationError) as err:
        earlier_runs.read(str(bad))
    assert str(err.value).startswith(f"continue_from={bad}: trial '1': ")
    assert "finalMeasurment" in str(err.value) and "\n" not in str(err.value)


def test_a_local_study_folder_gives_its_trials_and_recorded_objectives(tmp_path):
    folder = tmp_path / "out" / "study"
    folder.mkdir(parents=True)
    tl.write_trials(str(folder / "trials.json"), FOUR)
    (folder / "study.json").write_text(
        json.dumps({"studySpec": {"metrics": [{"metric_id": "val_loss", "goal": 2}]}})
    )
    got = earlier_runs.read(str(tmp_path / "out"))
    assert got.objectives == [("val_loss", "minimize")]
    assert got.label == "out" and len(got.trials) == 4


def test_a_vertex_hpt_job_is_read_with_its_goals(monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform.compat.types import hyperparameter_tuning_job as gca_job
    from google.cloud.aiplatform.compat.types import study as gca_study

    name = "projects/p/locations/us-central1/hyperparameterTuningJobs/42"
    proto = gca_job.HyperparameterTuningJob(
        name=name,
        study_spec=gca_study.StudySpec(
            metrics=[
                gca_study.StudySpec.MetricSpec(
                    metric_id="val_accuracy", goal=gca_study.StudySpec.MetricSpec.GoalType.MAXIMIZE
                )
            ]
        ),
        trials=[
            gca_study.Trial(
                id="7",
                state=gca_study.Trial.State.SUCCEEDED,
                parameters=[gca_study.Trial.Parameter(parameter_id="num_units", value=128)],
                final_measurement=gca_study.Measurement(
                    step_count=3,
                    metrics=[gca_study.Measurement.Metric(metric_id="val_accuracy", value=0.9)],
                ),
            )
        ],
    )
    asked = []
    monkeypatch.setattr(
        aiplatform.HyperparameterTuningJob,
        "_get_gca_resource",
        lambda self, resource_name, **kw: asked.append(resource_name) or proto,
    )
    got = earlier_runs.read(name, credentials=AnonymousCredentials())
    assert asked == [name]
    assert got.objectives == TODAY and got.label == "42"
    fit = continuation.reconcile(got, SPACE, TODAY, DEFAULTS)
    assert tl.trial_parameters(fit.trials[0]) == {"learning_rate": 0.01, "num_units": 128}
    assert fit.trials[0]["id"] == "42:7"


def test_a_vertex_pipeline_run_is_read_through_the_hpt_job_its_tune_step_ran(monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform
    from google.cloud.aiplatform.compat.types import pipeline_job as gca_pipeline
    from google.protobuf import struct_pb2

    from pipelines.targets.vertex import trials as vertex_trials

    hpt = "projects/p/locations/us-central1/hyperparameterTuningJobs/42"
    metadata = struct_pb2.Struct()
    metadata.update(
        {
            "output:gcp_resources": json.dumps(
                {
                    "resources": [
                        {
                            "resourceType": "HyperparameterTuningJob",
                            "resourceUri": f"https://us-central1-aiplatform.googleapis.com/v1/{hpt}",
                        }
                    ]
                }
            )
        }
    )
    name = "projects/p/locations/us-central1/pipelineJobs/run-1"
    proto = gca_pipeline.PipelineJob(
        name=name,
        job_detail=gca_pipeline.PipelineJobDetail(
            task_details=[
                gca_pipeline.PipelineTaskDetail(task_name="prepare-dataset"),
                gca_pipeline.PipelineTaskDetail(
                    task_name="hyperparameter-tuning-job", execution={"metadata": metadata}
                ),
            ]
        ),
    )
    monkeypatch.setattr(
        aiplatform.PipelineJob, "_get_gca_resource", lambda self, resource_name, **kw: proto
    )
    assert vertex_trials.hpt_job_of_pipeline(name, AnonymousCredentials()) == hpt
    proto.job_detail.task_details.pop()
    with pytest.raises(ValueError, match="no task of this run ran a HyperparameterTuningJob"):
        vertex_trials.hpt_job_of_pipeline(name, AnonymousCredentials())


def test_defaults_are_the_trainer_flags_defaults_and_the_runs_fixed_settings():
    values = earlier_runs.defaults(Settings(epochs=7))
    assert values["momentum"] == 0.9 and values["epochs"] == 7


def test_report_rows_mark_each_trials_origin():
    from pipelines.reports import trial_report
    from pipelines.study.search_space import Metric

    old = continuation.reconcile(earlier(FOUR), SPACE, TODAY, DEFAULTS).trials
    rows = trial_report.trial_rows(
        continuation.combine(old, new_trials(0.9)), Metric("val_accuracy", "maximize")
    )
    assert [(r.trial_id, r.origin) for r in rows][:3] == [
        ("1", ""),
        ("first:2", "first"),
        ("first:1", "first"),
    ]


# --------------------------------------------------------------------------- compile, CLI, lineage


def trials_file(tmp_path: Path) -> Path:
    """A trials JSON file as a Vertex run writes it (`Trial.to_json`), for today's default space."""
    from google.cloud.aiplatform_v1.types import Trial

    path = tmp_path / "vertex-trials.json"
    written = [
        json.loads(Trial.to_json(Trial.from_json(json.dumps(t))))
        for t in (
            trial(1, {"learning_rate": 0.01, "momentum": 0.8, "num_units": 64}, 0.7),
            trial(2, {"learning_rate": 0.02, "momentum": 0.85, "num_units": 256}, 0.9),
        )
    ]
    path.write_text(json.dumps(written))
    return path


@pytest.mark.parametrize("target", ["vertex", "kubeflow", "local"])
def test_compile_carries_the_earlier_trials_to_the_selection_step(tmp_path, target):
    import yaml

    from pipelines.compiler import compile_pipeline

    settings = Settings(
        continue_from=str(trials_file(tmp_path)),
        trainer_image="registry.example/hpt/trainer:v1",
        components_image="registry.example/hpt/components:v1",
    )
    spec = yaml.safe_load(Path(compile_pipeline(target, settings, tmp_path / "p.yaml")).read_text())
    default = spec["root"]["inputDefinitions"]["parameters"]["continued_trials"]["defaultValue"]
    assert [t["id"] for t in default] == ["vertex-trials:1", "vertex-trials:2"]
    tasks = spec["root"]["dag"]["tasks"]
    select = tasks["select-best-trial"]["inputs"]["parameters"]["continued_trials"]
    assert select == {"componentInputParameter": "continued_trials"}
    tune = next(t for name, t in tasks.items() if name.startswith("tune"))
    seeded = "continued_trials" in tune["inputs"]["parameters"]
    assert seeded == (target == "local")  # only the local study can be seeded


def cli(*args: str):
    from typer.testing import CliRunner

    from pipelines.app import cli as cli_module

    return CliRunner().invoke(cli_module.app, list(args))


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_compile_says_what_the_cloud_target_does_with_the_earlier_trials(
    tmp_path, monkeypatch, target
):
    monkeypatch.setenv("HPT_TRAINER_IMAGE", "registry.example/hpt/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "registry.example/hpt/components:v1")
    source = trials_file(tmp_path)
    out = tmp_path / "p.yaml"
    got = cli("compile", "--target", target, "--output", str(out), "--continue-from", str(source))
    assert got.exit_code == 0, got.output
    service = "Vertex (Vizier)" if target == "vertex" else "Katib"
    assert (
        f"note: continue_from: {service} cannot seed a study: the 2 earlier trial(s) are not "
        "re-run; the new study runs its max_trials=12 as usual and the selection step chooses "
        "over both"
    ) in got.output
    assert "note: objectives: " in got.output  # a trials file records no goals


@pytest.mark.parametrize(
    "source, expected",
    [
        ("gs://bucket/trials.json", "continue_from=gs://bucket/trials.json: expected a local run"),
        ("{tmp}/bad.json", "continue_from={tmp}/bad.json: trial '1': "),
    ],
)
def test_run_refuses_a_bad_continue_from_in_one_line_before_anything(tmp_path, source, expected):
    (tmp_path / "bad.json").write_text('[{"id": "1", "state": 4, "colour": "red"}]')
    output = tmp_path / "out"
    source, expected = source.format(tmp=tmp_path), expected.format(tmp=tmp_path)
    got = cli("run", "--continue-from", source, "--output", str(output))
    assert got.exit_code == 2
    lines = got.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hpt-pipeline: error: {expected}")
    assert not output.exists()


def test_lineage_links_the_run_to_the_one_it_continued(tmp_path):
    from pipelines.lineage import local as local_lineage
    from tests.test_lineage import write_run

    run = write_run(tmp_path / "out")
    produced = run / "tune-locally" / "executor_output.json"
    outputs = json.loads(produced.read_text())
    outputs["artifacts"]["trials"]["artifacts"][0]["metadata"]["continued_from"] = ["/runs/first"]
    produced.write_text(json.dumps(outputs))
    uri = run / "tune-locally" / "trials"
    old = continuation.reconcile(earlier(FOUR[:1], source="/runs/first"), SPACE, TODAY, DEFAULTS)
    tl.write_trials(str(uri), continuation.combine(old.trials, tl.read_trials(str(uri))))
    graph = local_lineage.local_lineage(run)
    assert graph.parents("artifact:tune-locally/trials") == [
        "task:tune-locally",
        "run:/runs/first",
    ]
    node = graph.nodes["trial:first:1"]
    assert node.details["continued_from"] == "/runs/first" and node.uri == ""


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


class FakeCustomObjects:
    """`CustomObjectsApi.list_namespaced_custom_object` over fixed Experiments and Trials."""

    def __init__(self, experiments, trials):
        self.objects = {"experiments": experiments, "trials": trials}
        self.calls = []

    def list_namespaced_custom_object(self, group, version, namespace, plural, label_selector):
        self.calls.append((group, version, namespace, plural, label_selector))
        return {"items": self.objects[plural]}


def katib_experiment(name: str, run_id: str) -> dict:
    base = f"minio://mlpipeline/v2/artifacts/hpt-pipeline/{run_id}/trial-job-spec/7/study"
    env = [{"name": "AIP_MODEL_DIR", "value": f"{base}/${{trialSpec.Name}}/model/"}]
    return {
        "metadata": {"name": name, "namespace": "team"},
        "spec": {
            "objective": {"type": "maximize", "objectiveMetricName": "val_accuracy"},
            "trialTemplate": {"trialSpec": {"spec": {"template": {"spec": {"env": env}}}}},
        },
    }


def test_a_kubeflow_run_is_read_from_the_katib_experiment_its_tune_step_ran():
    from pipelines.study.search_space import default_search_space
    from tests.test_kubeflow_katib import KATIB_TRIALS

    run_id = "0f8e9a1c-1234-4abc-9def-0123456789ab"
    api = FakeCustomObjects(
        [
            katib_experiment("other-hpt-1", "11111111-1234-4abc-9def-0123456789ab"),
            katib_experiment("hpt-study", run_id),
        ],
        KATIB_TRIALS,
    )
    got = earlier_runs.read(run_id, space=default_search_space(), namespace="team", kube_api=api)
    assert got.objectives == TODAY and got.label == "0f8e9a1c"
    assert len(got.trials) == len(KATIB_TRIALS)
    assert api.calls[-1] == (
        "kubeflow.org",
        "v1beta1",
        "team",
        "trials",
        "katib.kubeflow.org/experiment=hpt-study",
    )
    fit = continuation.reconcile(got, default_search_space(), TODAY, DEFAULTS)
    assert fit.trials[0]["id"] == "0f8e9a1c:1"
    with pytest.raises(ContinuationError, match="no Katib Experiment of run 2222"):
        earlier_runs.read(
            "22222222-1234-4abc-9def-0123456789ab",
            space=default_search_space(),
            namespace="team",
            kube_api=api,
        )


def test_continuing_a_runs_own_output_is_refused(tmp_path):
    output = tmp_path / "out"
    (output / "study").mkdir(parents=True)
    tl.write_trials(str(output / "study" / "trials.json"), FOUR)
    got = cli("run", "--continue-from", str(output), "--output", str(output))
    assert got.exit_code == 2
    assert got.output.strip() == (
        f"hpt-pipeline: error: continue_from={output}: that is this run's --output; rerun "
        "without --continue-from to extend its study in place (with a higher --max-trials)"
    )


def test_submit_refuses_continue_from_with_a_template_instead_of_dropping_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HPT_TRAINER_IMAGE", "registry.example/hpt/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "registry.example/hpt/components:v1")
    template = tmp_path / "p.yaml"
    template.write_text("{}")
    got = cli(
        "submit",
        "--dry-run",
        "--project",
        "my-project",
        "--region",
        "us-central1",
        "--pipeline-root",
        "gs://b/root",
        "--template",
        str(template),
        "--continue-from",
        str(trials_file(tmp_path)),
    )
    assert got.exit_code == 2, got.output
    assert "the earlier trials are compiled into the pipeline; compile --template" in got.output
    assert len(got.output.strip().splitlines()) == 1


def test_submit_says_what_vertex_does_with_the_earlier_trials(tmp_path, monkeypatch):
    monkeypatch.setenv("HPT_TRAINER_IMAGE", "registry.example/hpt/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "registry.example/hpt/components:v1")
    request = tmp_path / "request.json"
    got = cli(
        "submit",
        "--dry-run",
        "--project",
        "my-project",
        "--region",
        "us-central1",
        "--pipeline-root",
        "gs://b/root",
        "--continue-from",
        str(trials_file(tmp_path)),
        "--output",
        str(request),
    )
    assert got.exit_code == 0, got.output
    assert "note: continue_from: Vertex (Vizier) cannot seed a study" in got.output
    spec = json.loads(request.read_text())["pipelineJob"]["pipelineSpec"]
    default = spec["root"]["inputDefinitions"]["parameters"]["continued_trials"]["defaultValue"]
    assert [t["id"] for t in default] == ["vertex-trials:1", "vertex-trials:2"]
