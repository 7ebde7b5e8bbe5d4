"""Continuing a study: where earlier trials come from; how compile, CLI and lineage carry them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.settings import Settings
from pipelines.study import continuation
from pipelines.study import trials as tl
from pipelines.study.continuation import ContinuationError
from pipelines.targets import earlier_runs
from tests.test_continuation import DEFAULTS, FOUR, SPACE, TODAY, earlier, new_trials, trial

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


def test_a_run_of_a_kept_study_gives_its_own_studys_objectives(tmp_path):
    """Issue 51, case 2: after a fresh study of other objectives took `<output>/study`, the
    earlier run's objectives are its own study's (the folder its trials artifact recorded)."""
    from tests.test_trial_report import write_run

    out = tmp_path / "out"
    for name, metric, goal in (("kept", "val_loss", 2), ("current", "val_accuracy", 1)):
        (out / "studies" / name).mkdir(parents=True)
        spec = {"studySpec": {"metrics": [{"metric_id": metric, "goal": goal}]}}
        (out / "studies" / name / "study.json").write_text(json.dumps(spec))
    (out / "study").symlink_to("studies/current")
    run = write_run(out, "hpt-pipeline-2026-01-01-00-00-00-000000", FOUR)
    executor = run / "tune-locally" / "executor_output.json"
    executor.write_text(executor.read_text().replace(str(out / "study"), str(out / "studies/kept")))

    assert earlier_runs.read(str(run)).objectives == [("val_loss", "minimize")]


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
        kubeflow_namespace="team-a",  # compile refuses `kubeflow` (wiring.kubeflow)
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


def test_continuing_an_output_folder_of_several_runs_takes_the_newest_runs_trials(tmp_path):
    from tests.test_trial_report import write_run

    out = tmp_path / "out"
    newest = [trial(i, {"learning_rate": 0.01, "num_units": u}, 0.7) for i, u in enumerate(
        (64, 128, 256), start=1)]  # fmt: skip
    write_run(out, "hpt-pipeline-2026-01-02-00-00-00-000000", newest)
    write_run(out, "hpt-pipeline-2026-01-01-00-00-00-000000", newest[:1])
    got = cli("compile", "--output", str(tmp_path / "p.yaml"), "--continue-from", str(out))
    assert got.exit_code == 0, got.output
    said = " ".join(got.output.split())  # notes wrap at the terminal's width
    assert "continue_from: the local study starts from 3 earlier trial(s)" in said
    assert [t["id"] for t in earlier_runs.read(str(out)).trials] == ["1", "2", "3"]


@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_compile_says_what_the_cloud_target_does_with_the_earlier_trials(
    tmp_path, monkeypatch, target
):
    monkeypatch.setenv("HPT_TRAINER_IMAGE", "registry.example/hpt/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "registry.example/hpt/components:v1")
    monkeypatch.setenv("HPT_KUBEFLOW_NAMESPACE", "team-a")  # compile refuses `kubeflow`
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
