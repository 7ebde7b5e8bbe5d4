"""The Vertex HPT job as GCPC's launcher builds and sends it, resolved the way Vertex does.

No network: GCPC's own launcher code runs with the Vertex client replaced at the
boundary (the `create_hyperparameter_tuning_job` call), so what it would send is
checked against the real `aiplatform_v1` types.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from pipelines.jobs import worker_pools
from pipelines.settings import Settings
from pipelines.study.search_space import default_search_space
from pipelines.targets.vertex import hpt_job


def as_vertex_renders(value: Any) -> Any:
    """What a component receives for a list/dict parameter: JSON, numbers as doubles."""
    return json.loads(json.dumps(value), parse_int=float)


def payload(**overrides: Any) -> dict[str, Any]:
    space = default_search_space()
    pools = worker_pools.trial_worker_pool_specs(
        image_uri="europe-docker.pkg.dev/p/r/trainer:v1",
        command=["python", "-m", "trainer.task"],
        args=["--data=gs://b/data", "--epochs=4"],
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=2,
    )
    values = dict(
        display_name="hpt-pipeline-study",
        study_spec_metrics=as_vertex_renders(space.to_study_spec_metrics()),
        study_spec_parameters=as_vertex_renders(space.to_study_spec_parameters()),
        study_spec_algorithm="ALGORITHM_UNSPECIFIED",
        study_spec_measurement_selection_type="BEST_MEASUREMENT",
        max_trial_count=12.0,
        parallel_trial_count=3.0,
        max_failed_trial_count=0.0,
        worker_pool_specs=as_vertex_renders(pools),
        base_output_directory="gs://b/root/study",
        service_account="",
        network="",
        encryption_spec_key_name="",
        early_stopping=False,
    )
    values.update(overrides)
    return hpt_job.hpt_job_payload(**values)


def test_doubles_as_vertex_renders_them_do_not_reach_the_request_as_floats():
    raw = as_vertex_renders({"replica_count": 1, "scale_type": 2})
    assert raw == {"replica_count": 1.0, "scale_type": 2.0}
    from google.cloud.aiplatform_v1.types import HyperparameterTuningJob

    with pytest.raises(TypeError):  # what an unconverted payload would do in the launcher
        HyperparameterTuningJob({"max_trial_count": 4.0})
    request = hpt_job.launcher_request(payload())
    assert request.max_trial_count == 12 and request.parallel_trial_count == 3
    pool = request.trial_job_spec.worker_pool_specs[0]
    assert (pool.replica_count, pool.machine_spec.accelerator_count) == (1, 2)


def test_the_request_carries_the_search_space_and_the_trial_pool():
    request = hpt_job.launcher_request(payload())
    spec = request.study_spec
    assert [p.parameter_id for p in spec.parameters] == ["learning_rate", "momentum", "num_units"]
    assert spec.parameters[0].scale_type.name == "UNIT_LOG_SCALE"
    assert list(spec.parameters[2].discrete_value_spec.values) == [64, 128, 256]
    assert spec.metrics[0].metric_id == "val_accuracy" and spec.metrics[0].goal.name == "MAXIMIZE"
    assert spec.algorithm.name == "ALGORITHM_UNSPECIFIED"
    assert request.trial_job_spec.base_output_directory.output_uri_prefix == "gs://b/root/study"
    container = request.trial_job_spec.worker_pool_specs[0].container_spec
    assert container.args[:2] == ["--data=gs://b/data", "--epochs=4"]
    assert not request.encryption_spec.kms_key_name  # empty strings stripped, as the launcher does


def test_early_stopping_survives_the_launchers_empty_field_stripping():
    from google.cloud.aiplatform_v1.types import HyperparameterTuningJob, StudySpec
    from google_cloud_pipeline_components.container.v1.gcp_launcher.utils import json_util

    with_stopping = payload(early_stopping=True)
    # The launcher alone would drop the whole spec ({use_elapsed_duration: false} is "empty").
    stripped = json_util.recursive_remove_empty(json.loads(json.dumps(with_stopping)))
    assert "median_automated_stopping_spec" not in stripped["study_spec"]
    request = hpt_job.launcher_request(with_stopping)
    pb = HyperparameterTuningJob.pb(request)
    assert pb.study_spec.WhichOneof("automated_stopping_spec") == "median_automated_stopping_spec"
    assert (
        StudySpec.pb(request.study_spec).median_automated_stopping_spec.use_elapsed_duration
        is False
    )
    off = HyperparameterTuningJob.pb(hpt_job.launcher_request(payload()))
    assert off.study_spec.WhichOneof("automated_stopping_spec") is None


def test_the_component_runs_gcpc_launcher_code_and_sends_the_stopping_spec(monkeypatch, tmp_path):
    """The tune component end to end with only the Vertex API call replaced."""
    from google_cloud_pipeline_components.container.v1.gcp_launcher import job_remote_runner
    from google_cloud_pipeline_components.container.v1.hyperparameter_tuning_job import (
        remote_runner,
    )

    from pipelines.targets.vertex.steps.tune import tune_on_vertex

    sent: dict[str, Any] = {}

    class FakeClient:
        def create_hyperparameter_tuning_job(self, parent, hyperparameter_tuning_job):
            from google.cloud.aiplatform_v1.types import HyperparameterTuningJob

            sent["parent"] = parent
            sent["job"] = HyperparameterTuningJob(hyperparameter_tuning_job)
            return SimpleNamespace(name=f"{parent}/hyperparameterTuningJobs/42")

    def fake_init(self, job_type, project, location, gcp_resources):
        self.job_type, self.project, self.location = job_type, project, location
        self.gcp_resources = gcp_resources
        self.job_client = FakeClient()
        self.job_uri_prefix = f"https://{location}-aiplatform.googleapis.com/v1/"

    polled: list[str] = []
    monkeypatch.setattr(job_remote_runner.JobRemoteRunner, "__init__", fake_init)
    monkeypatch.setattr(
        job_remote_runner.JobRemoteRunner, "poll_job", lambda self, fn, name: polled.append(name)
    )
    assert remote_runner.create_hyperparameter_tuning_job_with_client  # the code path used
    gcp_resources = tmp_path / "gcp_resources"
    values = payload(early_stopping=True)
    tune_on_vertex.python_func(
        display_name="study",
        project="my-project",
        location="europe-west4",
        study_spec_metrics=as_vertex_renders(values["study_spec"]["metrics"]),
        study_spec_parameters=as_vertex_renders(values["study_spec"]["parameters"]),
        study_spec_algorithm="RANDOM_SEARCH",
        study_spec_measurement_selection_type="LAST_MEASUREMENT",
        max_trial_count=8.0,
        parallel_trial_count=2.0,
        max_failed_trial_count=1.0,
        worker_pool_specs=as_vertex_renders(values["trial_job_spec"]["worker_pool_specs"]),
        base_output_directory="gs://b/root/study",
        service_account="sa@my-project.iam.gserviceaccount.com",
        network="",
        encryption_spec_key_name="",
        early_stopping=True,
        labels={"team": "vision"},
        gcp_resources=str(gcp_resources),
    )
    job = sent["job"]
    assert sent["parent"] == "projects/my-project/locations/europe-west4"
    assert job.study_spec.algorithm.name == "RANDOM_SEARCH"
    assert "median_automated_stopping_spec" in type(job.study_spec).to_dict(job.study_spec)
    assert job.trial_job_spec.service_account == "sa@my-project.iam.gserviceaccount.com"
    assert job.max_failed_trial_count == 1
    assert dict(job.labels) == {"team": "vision"}
    resources = json.loads(gcp_resources.read_text())["resources"][0]
    assert resources["resourceType"] == "HyperparameterTuningJob"
    assert resources["resourceUri"].endswith(
        "projects/my-project/locations/europe-west4/hyperparameterTuningJobs/42"
    )
    assert polled == ["projects/my-project/locations/europe-west4/hyperparameterTuningJobs/42"]


def test_the_runs_labels_reach_the_hpt_job_beside_the_system_labels(monkeypatch):
    from google.cloud.aiplatform_v1.types import HyperparameterTuningJob

    monkeypatch.delenv("VERTEX_AI_PIPELINES_RUN_LABELS", raising=False)
    labelled = payload(labels={"team": "vision", "cost-center": "cc-42"})
    request = hpt_job.launcher_request(labelled)
    assert isinstance(request, HyperparameterTuningJob)
    assert dict(request.labels) == {"team": "vision", "cost-center": "cc-42"}
    assert not dict(hpt_job.launcher_request(payload()).labels)
    # On Vertex the step's environment carries the run's system labels (GCPC keeps them).
    system = {"vertex-ai-pipelines-run-billing-id": "8127", "team": "from-system"}
    monkeypatch.setenv("VERTEX_AI_PIPELINES_RUN_LABELS", json.dumps(system))
    request = hpt_job.launcher_request(labelled)
    assert dict(request.labels) == {
        "vertex-ai-pipelines-run-billing-id": "8127",
        "team": "vision",  # the run's own label wins a clash, as in GCPC's ops
        "cost-center": "cc-42",
    }
    assert dict(hpt_job.launcher_request(payload()).labels) == system


def test_the_tune_step_gets_the_runs_labels_parameter(tmp_path):
    import yaml

    from pipelines.compiler import compile_pipeline

    spec = yaml.safe_load(
        open(compile_pipeline("vertex", Settings(labels={"team": "vision"}), tmp_path / "v.yaml"))
    )
    assert spec["root"]["inputDefinitions"]["parameters"]["labels"]["defaultValue"] == {
        "team": "vision"
    }
    task = spec["root"]["dag"]["tasks"]["tune-on-vertex"]
    assert task["inputs"]["parameters"]["labels"] == {"componentInputParameter": "labels"}
    custom = spec["root"]["dag"]["tasks"][
        "custom-training-job"
    ]  # the same parameter as the final job
    assert custom["inputs"]["parameters"]["labels"] == {"componentInputParameter": "labels"}


def test_settings_early_stopping_compiles_into_the_vertex_pipeline(tmp_path):
    import yaml

    from pipelines.compiler import compile_pipeline

    path = compile_pipeline("vertex", Settings(early_stopping=True), tmp_path / "v.yaml")
    spec = yaml.safe_load(open(path))
    assert spec["root"]["inputDefinitions"]["parameters"]["early_stopping"]["defaultValue"] is True


def test_compile_with_trial_workers_sends_every_trial_a_chief_pool_and_a_worker_pool(
    tmp_path, monkeypatch
):
    """`compile --target vertex --trial-workers 2`: the trial job spec as the compiled pipeline
    resolves it, through GCPC's launcher into `aiplatform_v1` (strict): a chief pool of one
    and a worker pool of two, the same container and machine (the final job's builder)."""
    import yaml
    from typer.testing import CliRunner

    from components.job_specs import trial_job_spec
    from pipelines.app import cli
    from tests.vertex_resolve import resolve_inputs

    monkeypatch.setenv("HPT_TRAINER_IMAGE", "europe-docker.pkg.dev/p/r/trainer:v1")
    monkeypatch.setenv("HPT_COMPONENTS_IMAGE", "europe-docker.pkg.dev/p/r/components:v1")
    out = tmp_path / "vertex.yaml"
    args = ["compile", "--target", "vertex", "--trial-workers", "2", "--output", str(out)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    inputs = resolve_inputs(yaml.safe_load(out.read_text()), outputs={})["trial-job-spec"]
    assert inputs["worker_count"] == 2
    place = SimpleNamespace(uri="gs://b/root/prepare-dataset/dataset", path="/gcs/b/dataset")
    pools, _ = trial_job_spec.python_func(dataset=place, study=place, **inputs)
    request = hpt_job.launcher_request(payload(worker_pool_specs=as_vertex_renders(pools)))
    chief, workers = request.trial_job_spec.worker_pool_specs
    assert (chief.replica_count, workers.replica_count) == (1, 2)
    assert chief.container_spec == workers.container_spec
    assert chief.machine_spec == workers.machine_spec
    assert chief.machine_spec.accelerator_count == Settings().machines.trial_accelerator_count
