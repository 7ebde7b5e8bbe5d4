"""Spot and flex-start capacity (trial_scheduling, final_scheduling, max_wait_hours) per target."""

from __future__ import annotations

import pytest
import yaml
from google.protobuf import json_format
from typer.testing import CliRunner

from pipelines.app import cli
from pipelines.compiler import compile_pipeline
from pipelines.jobs import worker_pools
from pipelines.settings import Settings, SettingsError
from pipelines.targets.vertex import hpt_job
from pipelines.wiring.base import SCHEDULING_PARAMETERS
from tests.test_pipeline_spec import compiled, for_target
from tests.test_vertex_hpt_job import payload
from tests.vertex_resolve import capture_custom_job, executor_args, flag, resolve_inputs

SPOT_STUDY = dict(trial_scheduling="spot", final_scheduling="flex_start", max_wait_hours=2.0)


def _vertex(tmp_path, **settings) -> dict:
    path = compile_pipeline("vertex", Settings(**settings), tmp_path / "vertex.yaml")
    return yaml.safe_load(open(path, encoding="utf-8"))


def _final_pools() -> list:
    return worker_pools.training_worker_pool_specs(
        image_uri="europe-docker.pkg.dev/p/r/trainer:v1",
        command=["python", "-m", "trainer.task"],
        args=["--data=gs://b/data", "--epochs=4"],
        machine_type="n1-standard-8",
        accelerator_type="NVIDIA_TESLA_T4",
        accelerator_count=1,
        worker_count=1,
    )


def test_vertex_trials_run_on_spot_and_the_study_keeps_its_stopping_config(tmp_path):
    """Issue 53's must-show: the HPT job's trial spec carries SPOT, parsed strictly."""
    from google.cloud.aiplatform_v1.types import HyperparameterTuningJob, Scheduling

    spec = _vertex(tmp_path, max_trials_no_progress=5, **SPOT_STUDY)
    tune = resolve_inputs(spec, {})["tune-on-vertex"]
    assert (tune["trial_scheduling"], tune["max_wait_hours"]) == ("spot", 2.0)
    request = hpt_job.launcher_request(
        payload(
            trial_scheduling=tune["trial_scheduling"],
            max_wait_hours=tune["max_wait_hours"],
            max_trials_no_progress=tune["max_trials_no_progress"],
        )
    )
    pb = HyperparameterTuningJob.pb(request)
    assert pb.trial_job_spec.scheduling.strategy == Scheduling.Strategy.SPOT
    assert not pb.trial_job_spec.scheduling.HasField("max_wait_duration")  # spot never queues
    assert pb.study_spec.study_stopping_config.max_num_trials_no_progress.value == 5
    strict = json_format.MessageToJson(pb)
    json_format.Parse(strict, HyperparameterTuningJob.pb(HyperparameterTuningJob()))
    queued = hpt_job.launcher_request(payload(trial_scheduling="flex_start", max_wait_hours=0.5))
    assert queued.trial_job_spec.scheduling.strategy == Scheduling.Strategy.FLEX_START
    assert queued.trial_job_spec.scheduling.max_wait_duration.total_seconds() == 1800
    standard = hpt_job.launcher_request(payload())
    assert standard.trial_job_spec.scheduling.strategy == Scheduling.Strategy.STANDARD


@pytest.mark.parametrize(
    ("overrides", "strategy", "wait_s"),
    [({}, "FLEX_START", 7200), ({"final_scheduling": "spot"}, "SPOT", None)],
)
def test_the_final_custom_job_gets_its_capacity_through_gcpcs_launcher(
    tmp_path, monkeypatch, overrides, strategy, wait_s
):
    """final_scheduling → GCPC's CustomTrainingJobOp → the CustomJob its launcher sends.

    A `--param final_scheduling=spot` at submit time (`overrides`) changes it too.
    """
    from google.cloud.aiplatform_v1.types import CustomJob
    from google_cloud_pipeline_components.container.v1.custom_job import remote_runner

    from pipelines.targets.vertex.steps.train_final import final_scheduling

    spec = _vertex(tmp_path, **SPOT_STUDY)
    capacity = resolve_inputs(spec, {}, overrides)["final-scheduling"]
    produced = {
        "final-scheduling": final_scheduling.python_func(**capacity)._asdict(),
        "final-job-spec": {
            "worker_pool_specs": _final_pools(),
            "base_output_directory": "gs://b/final",
        },
    }
    inputs = resolve_inputs(spec, produced, overrides)["custom-training-job"]
    sent = capture_custom_job(monkeypatch)
    remote_runner.create_custom_job(
        type="CustomJob",
        project="p",
        location="europe-west4",
        payload=flag(executor_args(spec, "custom-training-job", inputs), "--payload"),
        gcp_resources=str(tmp_path / "gcp_resources"),
    )
    scheduling = CustomJob.pb(sent["job"]).job_spec.scheduling
    assert scheduling.strategy == scheduling.Strategy.Value(strategy)
    assert scheduling.HasField("max_wait_duration") == (wait_s is not None)
    if wait_s:
        assert scheduling.max_wait_duration.seconds == wait_s


def test_an_unknown_strategy_given_at_run_time_stops_the_step_in_one_line():
    from pipelines.targets.vertex.steps.train_final import final_scheduling

    with pytest.raises(ValueError, match=r"^scheduling='preemptible': expected one of standard"):
        final_scheduling.python_func(strategy="preemptible", max_wait_hours=24.0)


def test_only_the_vertex_spec_carries_the_scheduling_parameters(tmp_path):
    for target in ("local", "kubeflow"):
        params = compiled(tmp_path, target)["root"]["inputDefinitions"]["parameters"]
        assert not SCHEDULING_PARAMETERS & set(params), target
    vertex = _vertex(tmp_path, **SPOT_STUDY)["root"]["inputDefinitions"]["parameters"]
    assert {n: vertex[n]["defaultValue"] for n in sorted(SCHEDULING_PARAMETERS)} == {
        "final_scheduling": "flex_start",
        "max_wait_hours": 2.0,
        "trial_scheduling": "spot",
    }


@pytest.mark.parametrize(("target", "strategy"), [("local", "spot"), ("kubeflow", "flex_start")])
@pytest.mark.parametrize("name", ["trial_scheduling", "final_scheduling"])
def test_targets_without_the_capacity_refuse_it_in_one_line(tmp_path, target, strategy, name):
    """Kubeflow runs spot on a node pool (`test_kubeflow_spot`), not flex-start."""
    settings = for_target(target, Settings(**{name: strategy}))
    ending = r"\(unset it, or use --target vertex\)$"
    with pytest.raises(SettingsError, match=rf"^{name}={strategy}: .* {ending}"):
        compile_pipeline(target, settings, tmp_path / "p.yaml")
    assert not (tmp_path / "p.yaml").exists()


def test_run_refuses_spot_trials_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("HPT_TRIAL_SCHEDULING", "spot")
    output = tmp_path / "out"
    result = CliRunner().invoke(cli.app, ["run", "--output", str(output)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("hpt-pipeline: error: trial_scheduling=spot: the local target runs")
    assert not output.exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"trial_scheduling": "preemptible"},
            "--param trial_scheduling='preemptible': expected one of standard, spot, flex_start",
        ),
        (
            {"max_wait_hours": 5.0},
            "--param max_wait_hours=5.0: applies to flex_start jobs only (trial_scheduling=",
        ),
    ],
)
def test_a_bad_run_time_capacity_is_refused_before_sending(tmp_path, overrides, message):
    """`submit --param` and `schedule create --param` check them as the settings are checked."""
    from pipelines.app.parameter_checks import check_parameters

    spec = _vertex(tmp_path)
    with pytest.raises(SettingsError) as err:
        check_parameters(spec, overrides, overrides)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)
    check_parameters(spec, {"final_scheduling": "flex_start", "max_wait_hours": 5.0}, {})
